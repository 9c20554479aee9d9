"""Electricity cost of measurement windows, as the reference's ``zeus.monitor.price``.

A window's energy (from a :class:`~zeus_cpp.monitor.ZeusMonitor`) times the price of the
electricity (currency per kWh) while it ran, from a provider: a constant, a local time-of-use
tariff file (offline, the default recommendation), or an OpenEI utility-rates service::

    from zeus_cpp.monitor.price import EnergyCostMonitor, TariffElectricityPrice

    monitor = EnergyCostMonitor(TariffElectricityPrice.from_file("tariff.json"))
    monitor.begin_window("epoch")
    train_one_epoch()
    m = monitor.end_window("epoch")      # EnergyCostMeasurement
    print(m.gpu_energy_cost)             # {0: 0.0123, 1: 0.0121} (in the tariff's currency)

The computation runs in C++ in the calling thread (no subprocess, no queue): a failing web
service costs at most its timeouts and retries, then falls back or raises (docs/cost.md).
"""

from __future__ import annotations

import os as _os
from dataclasses import dataclass
from typing import Dict, Literal, Optional, Sequence, Tuple

from zeus_cpp import _zeus
from zeus_cpp.exception import ZeusElectricityPriceHTTPError, ZeusElectricityPriceNotFoundError
from zeus_cpp.monitor import _footprint
from zeus_cpp.monitor.energy import ZeusMonitor  # noqa: F401  (a name of the reference's module)

__all__ = [
    "EnergyCostMonitor",
    "EnergyCostMeasurement",
    "ElectricityPriceProvider",
    "ConstantElectricityPrice",
    "TariffElectricityPrice",
    "OpenEIClient",
    "ZeusElectricityPriceHTTPError",
    "ZeusElectricityPriceNotFoundError",
]

# The base of every provider, native ones included (so that isinstance works for all of them).
# A Python subclass implements either ``price_over(start, end)`` (Unix seconds; returns
# ``[(start, end, price per kWh), ...]`` tiling the interval) or the reference's
# ``get_current_electricity_prices()`` (``{"energy_rate_structure": [period][tier]{"rate",
# "adj"}, "energy_weekday_schedule": 12 x 24, "energy_weekend_schedule": 12 x 24}``, in the
# provider's local time: its ``timezone_offset_hours`` attribute when it has one, else this
# machine's). It may also define ``currency()``. Every provider has the reference's
# ``get_current_electricity_prices()`` (native ones describe their prices in that shape).
ElectricityPriceProvider = _zeus.ElectricityPriceProvider
ConstantElectricityPrice = _zeus.ConstantElectricityPrice
TariffElectricityPrice = _zeus.TariffElectricityPrice


class _ReferenceShapedProvider(_zeus.ElectricityPriceProvider):
    """Wraps an object that is not one of our providers but has the reference's
    ``get_current_electricity_prices()`` (e.g. a provider written against the reference)."""

    def __init__(self, provider: object) -> None:
        super().__init__()
        self._provider = provider
        offset = getattr(provider, "timezone_offset_hours", None)
        if offset is not None:
            self.timezone_offset_hours = float(offset)

    def get_current_electricity_prices(self) -> dict:
        return self._provider.get_current_electricity_prices()  # type: ignore[attr-defined]

    def currency(self) -> str:
        currency = getattr(self._provider, "currency", "")
        return str(currency() if callable(currency) else currency)


def _as_provider(provider: object) -> _zeus.ElectricityPriceProvider:
    if isinstance(provider, _zeus.ElectricityPriceProvider):
        return provider
    if callable(getattr(provider, "get_current_electricity_prices", None)):
        return _ReferenceShapedProvider(provider)
    raise TypeError(
        "electricity_price_provider must be a zeus_cpp.monitor.price ElectricityPriceProvider "
        "or have the reference's get_current_electricity_prices(), not "
        f"{type(provider).__name__}"
    )


class OpenEIClient(_zeus._OpenEIClient):
    """Electricity prices of a U.S. utility rate from the OpenEI Utility Rates API (v7).

    Args:
        location: ``(latitude, longitude)``, as the reference.
        label: The rate's ``label`` (its unique id in the Utility Rate Database).
        sector: ``"Residential"``, ``"Commercial"``, ``"Industrial"`` or ``"Lighting"``.
        radius: Search radius in miles around the location (0 to 200).
        api_key: The OpenEI API key; default: the ``OPENEI_API_KEY`` environment variable. One
            is required (free at https://openei.org/services/api/signup/); unlike the
            reference, none is built in.
        base_url: The API root (tests point it at a local server).
        timezone_offset_hours: The utility's local time, hours east of UTC (the rate's
            schedules are in local time); default: this machine's current offset.
        connect_timeout_s, read_timeout_s: Bounds on each request.
        max_attempts, backoff_initial_s: Retries of a failed request (5xx, network, timeout),
            the wait doubling after each.
        retry_after_failure_s: No new request this soon after a failed one.
        total_timeout_s: All of one fetch, its retries and pauses included, however slowly the
            service answers (30 s; answers over 16 MiB are refused too).
        fallback: A price per kWh to use when the service fails. Without it, a failure raises
            :class:`ZeusElectricityPriceHTTPError`; a rate that is not found raises
            :class:`ZeusElectricityPriceNotFoundError`.

    The rate is fetched on first use and kept for the client's lifetime; prices are its first
    tier's ``rate`` plus ``adj`` for the hour's period, in the utility's local time.
    """

    def __init__(
        self,
        location: Tuple[float, float],
        label: str,
        sector: Literal["Residential", "Commercial", "Industrial", "Lighting"] = "Residential",
        radius: int = 0,
        *,
        api_key: Optional[str] = None,
        base_url: str = "https://api.openei.org",
        timezone_offset_hours: Optional[float] = None,
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 10.0,
        max_attempts: int = 3,
        backoff_initial_s: float = 0.5,
        retry_after_failure_s: float = 60.0,
        fallback: Optional[float] = None,
        total_timeout_s: float = 30.0,
    ) -> None:
        latitude, longitude = (float(v) for v in location)
        key = api_key if api_key is not None else _os.environ.get("OPENEI_API_KEY", "")
        if not key:
            raise ValueError(
                "OpenEIClient needs an OpenEI API key: pass api_key=... or set OPENEI_API_KEY "
                "(a free key: https://openei.org/services/api/signup/); or price offline with "
                "TariffElectricityPrice.from_file (docs/cost.md)"
            )
        super().__init__(base_url, latitude, longitude, label, sector, int(radius), key,
                         timezone_offset_hours, float(connect_timeout_s), float(read_timeout_s),
                         int(max_attempts), float(backoff_initial_s),
                         float(retry_after_failure_s), fallback,
                         total_timeout_s=float(total_timeout_s))
        # The reference's attribute names (informational: the query is fixed at construction).
        self.lat, self.long = latitude, longitude
        self.label = label
        self.sector = sector
        self.radius = radius
        self.timezone_offset_hours = timezone_offset_hours

    def get_current_electricity_prices(self) -> Dict[str, list]:
        """The rate as the reference's rate data, read back from the converted tariff (first
        tiers only, each ``rate`` being the rate plus its ``adj``; 12 months x 24 local hours)."""
        return _zeus.ElectricityPriceProvider.get_current_electricity_prices(self)


@dataclass
class EnergyCostMeasurement:
    """A window's time (s), energy (J) and electricity cost (in the provider's currency) per
    device; ``mean_price_per_kwh`` and ``currency`` are ours."""

    time: float
    gpu_energy: Dict[int, float]
    gpu_energy_cost: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    cpu_energy_cost: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    dram_energy_cost: Optional[Dict[int, float]] = None
    mean_price_per_kwh: float = 0.0
    currency: str = ""

    @property
    def total_energy_cost(self) -> float:
        """The cost of every device measured (GPUs, CPUs and DRAM)."""
        return _footprint.total(self.gpu_energy_cost, self.cpu_energy_cost, self.dram_energy_cost)


class EnergyCostMonitor(_footprint.FootprintMonitor):
    """Measures the electricity cost of named windows.

    Args:
        electricity_price_provider: Any :class:`ElectricityPriceProvider` (constant, tariff,
            OpenEI client, or a Python subclass), or an object with the reference's
            ``get_current_electricity_prices()``.
        gpu_indices, cpu_indices, sync_execution_with: As for :class:`ZeusMonitor`.
        monitor: An energy monitor to use instead of a new ZeusMonitor (any WindowMonitor).

    A window's energy per device is spread over the window in proportion to time and multiplied
    by the price of each of the provider's stretches it covers (docs/cost.md).
    """

    def __init__(
        self,
        electricity_price_provider: object,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        sync_execution_with: object = "torch",
        *,
        monitor: Optional[object] = None,
    ) -> None:
        provider = _as_provider(electricity_price_provider)
        self.electricity_price_provider = electricity_price_provider
        self._provider = provider  # kept alive: the native monitor holds its C++ part
        # As the reference, a short window on a GPU whose energy counter has not ticked yet is
        # estimated from its power rather than reported as 0 J (and so as free).
        self._attach(_zeus._EnergyCostMonitor, provider, monitor, gpu_indices=gpu_indices,
                     cpu_indices=cpu_indices, approx_instant_energy=True,
                     sync_execution_with=sync_execution_with)

    def end_window(
        self, key: str, sync_execution: bool = True, cancel: bool = False
    ) -> EnergyCostMeasurement:
        """Closes window ``key`` (a ``ValueError`` if it is not open) and returns its cost. The
        energy window is closed even when the provider then raises."""
        fields, (mean, currency) = self._end_window(key, sync_execution, cancel, "energy_cost")
        return EnergyCostMeasurement(**fields, mean_price_per_kwh=mean, currency=currency)
