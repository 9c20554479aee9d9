"""Carbon emissions of measurement windows, as the reference's ``zeus.monitor.carbon``.

A window's energy (from a :class:`~zeus_cpp.monitor.ZeusMonitor`) times the carbon intensity of
the electricity (gCO2eq/kWh) while it ran, from a provider: a constant, a local time series
(offline, the default recommendation), or an ElectricityMaps-compatible web service::

    from zeus_cpp.monitor.carbon import CarbonEmissionMonitor, OfflineCarbonIntensity

    monitor = CarbonEmissionMonitor(OfflineCarbonIntensity.from_file("intensity.csv"))
    monitor.begin_window("epoch")
    train_one_epoch()
    m = monitor.end_window("epoch")      # CarbonEmissionMeasurement
    print(m.gpu_carbon_emission)         # {0: 12.3, 1: 12.1} (grams CO2eq)

The computation runs in C++ in the calling thread (no subprocess, no queue): a failing web
service costs at most its timeouts and retries, then falls back (docs/carbon.md).
"""

from __future__ import annotations

import datetime as _datetime
import time as _time
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from zeus_cpp import _zeus
from zeus_cpp.exception import ZeusCarbonIntensityHTTPError, ZeusCarbonIntensityNotFoundError
from zeus_cpp.monitor import _footprint
from zeus_cpp.monitor.energy import ZeusMonitor  # noqa: F401  (a name of the reference's module)

__all__ = [
    "CarbonEmissionMonitor",
    "CarbonEmissionMeasurement",
    "CarbonIntensityProvider",
    "ConstantCarbonIntensity",
    "OfflineCarbonIntensity",
    "ElectrictyMapsClient",
    "ElectricityMapsClient",
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
]

ConstantCarbonIntensity = _zeus.ConstantCarbonIntensity
OfflineCarbonIntensity = _zeus.OfflineCarbonIntensity


# The base of every provider, native ones included (so that isinstance works for all of them).
# A Python subclass implements either ``intensity_over(start, end)`` (Unix seconds; returns
# ``[(start, end, gCO2eq/kWh), ...]`` tiling the interval) or the reference's
# ``get_recent_carbon_intensity()`` (``{datetime: gCO2eq/kWh}``, each value holding until the
# next key). The reference's accessors are added to it here.
CarbonIntensityProvider = _zeus.CarbonIntensityProvider


def _get_current_carbon_intensity(self: _zeus.CarbonIntensityProvider) -> float:
    """The intensity now (gCO2eq/kWh)."""
    return self.intensity_at(_time.time())


CarbonIntensityProvider.get_current_carbon_intensity = _get_current_carbon_intensity
CarbonIntensityProvider.update_period = property(
    lambda self: _datetime.timedelta(seconds=self.update_period_s()),
    doc="The length of the provider's intervals (0 for a constant).")
CarbonIntensityProvider.history_length = property(
    lambda self: 24, doc="Hours of history get_recent_carbon_intensity covers (the reference's 24).")


def _recent(provider: _zeus.CarbonIntensityProvider, hours: int) -> Dict[_datetime.datetime, float]:
    now = _time.time()
    pieces = provider.intensity_over(now - hours * 3600.0, now)
    return {
        _datetime.datetime.fromtimestamp(start, tz=_datetime.timezone.utc): value
        for start, _end, value in pieces
    }


class ElectrictyMapsClient(_zeus._ElectricityMapsClient):
    """ElectricityMaps v3 client (the reference's spelling; :class:`ElectricityMapsClient` is the
    same class).

    Args:
        location: ``(latitude, longitude)``, as the reference; or give ``zone`` (e.g. ``"DE"``).
        estimate: Accept the service's estimated values (``disableEstimations=not estimate``).
        emission_factor_type: ``"direct"`` or ``"lifecycle"``.
        zone: An ElectricityMaps zone instead of a location.
        auth_token: Sent as the ``auth-token`` header.
        base_url: The API root (tests point it at a local server).
        connect_timeout_s, read_timeout_s: Bounds on each request.
        max_attempts, backoff_initial_s: Retries of a failed request (5xx, 429, network, bad
            JSON), the wait doubling after each.
        retry_after_failure_s: No new request this soon after a failed one.
        total_timeout_s: All of one fetch, its retries and pauses included, however slowly the
            service answers (15 s; answers over 16 MiB are refused too).
        fallback: gCO2eq/kWh to use when the service fails and no value is known. Otherwise the
            last known hour's value is used, and with nothing known
            :class:`ZeusCarbonIntensityHTTPError` is raised.
    """

    def __init__(
        self,
        location: Optional[Tuple[float, float]] = None,
        estimate: bool = False,
        emission_factor_type: str = "direct",
        *,
        zone: Optional[str] = None,
        auth_token: Optional[str] = None,
        base_url: str = "https://api.electricitymap.org/v3",
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 5.0,
        max_attempts: int = 3,
        backoff_initial_s: float = 0.5,
        retry_after_failure_s: float = 60.0,
        fallback: Optional[float] = None,
        total_timeout_s: float = 15.0,
    ) -> None:
        latitude = longitude = None
        if location is not None:
            latitude, longitude = (float(v) for v in location)
        super().__init__(base_url, zone or "", latitude, longitude, auth_token or "",
                         bool(estimate), emission_factor_type, float(connect_timeout_s),
                         float(read_timeout_s), int(max_attempts), float(backoff_initial_s),
                         float(retry_after_failure_s), fallback,
                         total_timeout_s=float(total_timeout_s))
        self.location = location
        # The reference's attribute names (informational: the query is fixed at construction).
        self.lat, self.long = (latitude, longitude)
        self.zone = zone

    # Settable, as the reference's attributes: the next request asks the new question (and the
    # cache, which answered the old one, is emptied).
    @property
    def estimate(self) -> bool:
        return self._estimate()

    @estimate.setter
    def estimate(self, value: bool) -> None:
        self.set_query(bool(value), self._emission_factor_type())

    @property
    def emission_factor_type(self) -> str:
        return self._emission_factor_type()

    @emission_factor_type.setter
    def emission_factor_type(self, value: str) -> None:
        self.set_query(self._estimate(), value)

    def get_recent_carbon_intensity(self) -> Dict[_datetime.datetime, float]:
        """The last :attr:`history_length` hours, hour start (UTC) -> gCO2eq/kWh."""
        return _recent(self, self.history_length)


ElectricityMapsClient = ElectrictyMapsClient


@dataclass
class CarbonEmissionMeasurement:
    """A window's time (s), energy (J) and carbon emissions (gCO2eq) per device."""

    time: float
    gpu_energy: Dict[int, float]
    gpu_carbon_emission: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    cpu_carbon_emission: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    dram_carbon_emission: Optional[Dict[int, float]] = None

    @property
    def total_carbon_emission(self) -> float:
        return _footprint.total(self.gpu_carbon_emission, self.cpu_carbon_emission,
                                self.dram_carbon_emission)


class CarbonEmissionMonitor(_footprint.FootprintMonitor):
    """Measures the carbon emissions of named windows.

    Args:
        carbon_intensity_provider: Any :class:`CarbonIntensityProvider` (constant, offline
            series, ElectricityMaps client, or a Python subclass).
        gpu_indices, cpu_indices, sync_execution_with: As for :class:`ZeusMonitor`.
        monitor: An energy monitor to use instead of a new ZeusMonitor (any WindowMonitor).

    A window's energy per device is spread over the window in proportion to time and multiplied
    by the intensity of each of the provider's intervals it covers (docs/carbon.md).
    """

    def __init__(
        self,
        carbon_intensity_provider: _zeus.CarbonIntensityProvider,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        sync_execution_with: object = "torch",
        *,
        monitor: Optional[object] = None,
    ) -> None:
        if not isinstance(carbon_intensity_provider, _zeus.CarbonIntensityProvider):
            raise TypeError(
                "carbon_intensity_provider must be a zeus_cpp.monitor.carbon "
                f"CarbonIntensityProvider, not {type(carbon_intensity_provider).__name__}"
            )
        self.carbon_intensity_provider = carbon_intensity_provider
        self._attach(_zeus._CarbonEmissionMonitor, carbon_intensity_provider, monitor,
                     gpu_indices=gpu_indices, cpu_indices=cpu_indices,
                     sync_execution_with=sync_execution_with)

    def end_window(
        self, key: str, sync_execution: bool = True, cancel: bool = False
    ) -> CarbonEmissionMeasurement:
        """Closes window ``key`` and returns its emissions. The energy window is closed even when
        the provider then raises :class:`ZeusCarbonIntensityHTTPError`."""
        fields, (_mean_intensity,) = self._end_window(
            key, sync_execution, cancel, "carbon_emission")
        return CarbonEmissionMeasurement(**fields)
