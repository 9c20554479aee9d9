"""What CarbonEmissionMonitor (carbon.py) and EnergyCostMonitor (price.py) share: an energy
monitor (the one given, or a new ZeusMonitor) whose windows a native monitor
(src/python/footprint.hpp) weighs through a provider, window by window, and the shape of the
figures it hands back.

The public classes keep their own ``__init__`` and ``end_window`` so that their signatures stay
the reference's; only the bodies are shared here."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from zeus_cpp.monitor.energy import ZeusMonitor

PerDevice = Dict[int, float]


def total(*per_device: Optional[PerDevice]) -> float:
    """The sum over every device of the dicts given (a None or empty one adds nothing)."""
    return sum(sum(part.values()) for part in per_device if part)


class FootprintMonitor:
    """Base of the footprint monitors; a subclass's ``__init__`` calls :meth:`_attach`, and its
    ``end_window`` builds its measurement from :meth:`_end_window`."""

    zeus_monitor: Any
    _native: Any

    def _attach(
        self,
        native_class: type,
        provider: object,
        monitor: Optional[object],
        **zeus_monitor_args: Any,
    ) -> None:
        """Measures energy with ``monitor`` (any WindowMonitor) or, without one, a new
        ``ZeusMonitor(**zeus_monitor_args)``, weighed through ``provider`` by ``native_class``."""
        self.zeus_monitor = monitor if monitor is not None else ZeusMonitor(**zeus_monitor_args)
        self._native = native_class(self.zeus_monitor, provider)

    @property
    def gpu_indices(self):  # noqa: ANN201  (whatever the energy monitor's are)
        """The GPUs the energy monitor measures."""
        return self.zeus_monitor.gpu_indices

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Opens window ``key`` (an error if it is open already: a ``ValueError`` from a
        ZeusMonitor)."""
        self._native.begin_window(key, sync_execution)

    def _end_window(
        self, key: str, sync_execution: bool, cancel: bool, figure: str
    ) -> Tuple[Dict[str, Any], List[Any]]:
        """Closes window ``key``: the measurement's fields (``time``, and for GPUs, CPUs and
        DRAM ``<family>_energy`` and ``<family>_<figure>``; the CPUs' and DRAM's None when none
        were measured, as the reference's), and what the native tuple has after them."""
        (time_s, gpu_energy, gpu_figure, cpu_energy, cpu_figure, dram_energy, dram_figure,
         *rest) = self._native.end_window(key, sync_execution, cancel)
        fields = {
            "time": time_s,
            "gpu_energy": gpu_energy,
            f"gpu_{figure}": gpu_figure,
            "cpu_energy": cpu_energy or None,
            f"cpu_{figure}": cpu_figure or None,
            "dram_energy": dram_energy or None,
            f"dram_{figure}": dram_figure or None,
        }
        return fields, rest
