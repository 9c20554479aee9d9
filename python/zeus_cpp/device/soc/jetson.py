"""NVIDIA Jetson boards at the reference's path ``zeus.device.soc.jetson``.

The board's INA3221 power rails are found in sysfs by the native device layer (the L4T
``ina3221x`` iio driver, or the mainline ``ina3221`` hwmon driver; docs/devices.md, "Jetson")
and polled in the background by the native sampler, which integrates each rail's held power
into energy. ``ZEUS_JETSON_ROOT`` names another root than ``/`` (a fake tree, for tests).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Optional, Tuple

from zeus_cpp import _zeus
from zeus_cpp.device.soc.common import SoC, SoCMeasurement, _optional_difference
from zeus_cpp.exception import ZeusSoCInitError

# The rail kinds (zeus/device/jetson.hpp) behind each of the measurement's summed fields.
_FIELD_OF_KIND = {"cpu": "cpu_energy_mj", "gpu": "gpu_energy_mj", "total": "total_energy_mj",
                  "soc": "soc_energy_mj"}


class ZeusJetsonInitError(ZeusSoCInitError):
    """The Jetson's power rails could not be opened."""


@dataclasses.dataclass
class JetsonMeasurement(SoCMeasurement):
    """A Jetson's energy in millijoules, None where the board has no such rail.

    ``cpu_energy_mj``, ``gpu_energy_mj`` and ``total_energy_mj`` are the reference's fields (the
    rails whose names say CPU, GPU, and the board's input). zeus_cpp adds ``soc_energy_mj`` (the
    SoC/CV rails), ``rail_energy_mj`` (every rail by its own name) and ``skipped_reads`` (rail
    reads that failed, each rail's last power held over them).
    """

    cpu_energy_mj: Optional[float] = None
    gpu_energy_mj: Optional[float] = None
    total_energy_mj: Optional[float] = None
    soc_energy_mj: Optional[float] = None
    rail_energy_mj: Dict[str, float] = dataclasses.field(default_factory=dict)
    skipped_reads: int = 0

    @classmethod
    def _from_rails(cls, rails: Iterable[Tuple[str, str, float]],
                    skipped_reads: int = 0) -> "JetsonMeasurement":
        """From ``(name, kind, energy J)`` per rail (what the native monitor measured)."""
        measurement = cls(skipped_reads=int(skipped_reads))
        for name, kind, energy_j in rails:
            energy_mj = float(energy_j) * 1000.0
            measurement.rail_energy_mj[name] = energy_mj
            field = _FIELD_OF_KIND.get(kind)
            if field is not None:
                setattr(measurement, field, (getattr(measurement, field) or 0.0) + energy_mj)
        return measurement

    def __sub__(self, other: "JetsonMeasurement") -> "JetsonMeasurement":
        if not isinstance(other, JetsonMeasurement):
            return NotImplemented
        return JetsonMeasurement(
            cpu_energy_mj=_optional_difference(self.cpu_energy_mj, other.cpu_energy_mj),
            gpu_energy_mj=_optional_difference(self.gpu_energy_mj, other.gpu_energy_mj),
            total_energy_mj=_optional_difference(self.total_energy_mj, other.total_energy_mj),
            soc_energy_mj=_optional_difference(self.soc_energy_mj, other.soc_energy_mj),
            rail_energy_mj={name: energy - other.rail_energy_mj[name]
                            for name, energy in self.rail_energy_mj.items()
                            if name in other.rail_energy_mj},
            skipped_reads=self.skipped_reads - other.skipped_reads,
        )

    def zero_all_fields(self) -> None:
        for field in ("cpu_energy_mj", "gpu_energy_mj", "total_energy_mj", "soc_energy_mj"):
            if getattr(self, field) is not None:
                setattr(self, field, 0.0)
        self.rail_energy_mj = {name: 0.0 for name in self.rail_energy_mj}
        self.skipped_reads = 0


class Jetson(SoC):
    """The Jetson's power rails, polled every ``period_s`` seconds (default 50 ms)."""

    def __init__(self, period_s: Optional[float] = None) -> None:
        super().__init__()
        found = _zeus._soc_discovery()
        if not found["available"]:
            raise ZeusJetsonInitError(found["message"])
        self.model: str = found["model"]
        self._rails = list(found["rails"])  # [(name, kind)]
        self._sampler = (_zeus._SocSampler() if period_s is None
                         else _zeus._SocSampler(float(period_s)))

    @property
    def rails(self) -> Dict[str, str]:
        """Every rail's name and kind (cpu, gpu, soc, total, other)."""
        return dict(self._rails)

    def get_available_metrics(self) -> set:
        kinds = {kind for _, kind in self._rails}
        return {field for kind, field in _FIELD_OF_KIND.items() if kind in kinds}

    def get_total_energy_consumption(self) -> JetsonMeasurement:
        energy = self._sampler.energy_j()
        skipped = sum(self._sampler.skipped())
        return JetsonMeasurement._from_rails(
            [(name, kind, joules) for (name, kind), joules in zip(self._rails, energy)], skipped)

    def __repr__(self) -> str:
        return f"Jetson(model={self.model!r}, rails={self.rails!r})"


__all__ = ["Jetson", "JetsonMeasurement", "ZeusJetsonInitError"]
