"""zeus_cpp.monitor.carbon on simulated GPUs: constant, offline and Python providers, and the
ElectricityMaps client against a local HTTP server (answers, 500, malformed JSON, slow, gone)."""

from __future__ import annotations

import time

import pytest

from local_http import NO_SYNC, LocalHTTPServer, QuietHandler, kwh
from zeus_cpp.exception import (
    ZeusBaseError,
    ZeusCarbonIntensityHTTPError,
    ZeusCarbonIntensityNotFoundError,
)
from zeus_cpp.monitor import carbon
from zeus_cpp.monitor.carbon import (
    CarbonEmissionMeasurement,
    CarbonEmissionMonitor,
    CarbonIntensityProvider,
    ConstantCarbonIntensity,
    ElectricityMapsClient,
    ElectrictyMapsClient,
    OfflineCarbonIntensity,
)


def test_reference_names():
    assert ElectrictyMapsClient is ElectricityMapsClient
    assert carbon.ZeusCarbonIntensityHTTPError is ZeusCarbonIntensityHTTPError
    assert issubclass(ZeusCarbonIntensityNotFoundError, ZeusBaseError)
    for name in carbon.__all__:
        assert hasattr(carbon, name), name
    assert isinstance(ConstantCarbonIntensity(1.0), CarbonIntensityProvider)


def test_constant_provider_window():
    monitor = CarbonEmissionMonitor(ConstantCarbonIntensity(400.0), **NO_SYNC)
    monitor.begin_window("step")
    time.sleep(0.05)
    m = monitor.end_window("step")
    assert isinstance(m, CarbonEmissionMeasurement)
    assert set(m.gpu_energy) == {0, 1}
    for gpu, energy in m.gpu_energy.items():
        assert energy > 0
        assert m.gpu_carbon_emission[gpu] == pytest.approx(kwh(energy) * 400.0)
    assert m.total_carbon_emission == pytest.approx(sum(m.gpu_carbon_emission.values()))
    monitor.begin_window("step")
    cancelled = monitor.end_window("step", cancel=True)
    assert all(v == 0 for v in cancelled.gpu_carbon_emission.values())


def test_offline_csv_and_hostile_files(tmp_path):
    now = time.time()
    path = tmp_path / "ci.csv"
    path.write_text(
        "timestamp,gco2eq_per_kwh\n"
        f"{now - 7200:.0f},100\n"
        f"{now - 3600:.0f},250\n"
    )
    provider = OfflineCarbonIntensity.from_file(str(path))
    assert provider.get_current_carbon_intensity() == 250.0
    monitor = CarbonEmissionMonitor(provider, gpu_indices=[1], **NO_SYNC)
    monitor.begin_window("w")
    m = monitor.end_window("w")
    assert m.gpu_carbon_emission[1] == pytest.approx(kwh(m.gpu_energy[1]) * 250.0)
    # Across a point: half at each value.
    pieces = provider.intensity_over(now - 5400, now - 1800)
    assert [p[2] for p in pieces] == [100.0, 250.0]

    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,gco2eq_per_kwh\n1,100\n2,oops\n")
    with pytest.raises(ValueError, match="bad.csv:3"):
        OfflineCarbonIntensity.from_file(str(bad))
    unsorted = tmp_path / "unsorted.csv"
    unsorted.write_text("timestamp,gco2eq_per_kwh\n2,1\n1,1\n")
    with pytest.raises(ValueError, match="unsorted.csv:3"):
        OfflineCarbonIntensity.from_file(str(unsorted))
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(ValueError, match="no carbon intensity points"):
        OfflineCarbonIntensity.from_file(str(empty))


def test_python_provider_with_the_reference_interface():
    class Recent(CarbonIntensityProvider):
        def get_recent_carbon_intensity(self):
            import datetime

            start = datetime.datetime.fromtimestamp(time.time() - 3600, tz=datetime.timezone.utc)
            return {start: 123.0}

    provider = Recent()
    assert provider.get_current_carbon_intensity() == 123.0
    monitor = CarbonEmissionMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    m = monitor.end_window("w")
    assert m.gpu_carbon_emission[0] == pytest.approx(kwh(m.gpu_energy[0]) * 123.0)

    class Nothing(CarbonIntensityProvider):
        pass

    with pytest.raises(TypeError, match="intensity_over"):
        Nothing().intensity_at(0.0)
    with pytest.raises(TypeError):
        CarbonEmissionMonitor(object(), **NO_SYNC)


class FakeService:
    """An ElectricityMaps-shaped server on loopback; `mode` picks the answer."""

    def __init__(self):
        self.mode = "ok"
        self.hits = 0
        self.tokens = []
        self.paths = []
        service = self

        class Handler(QuietHandler):
            def do_GET(self):
                service.hits += 1
                service.tokens.append(self.headers.get("auth-token"))
                service.paths.append(self.path)
                if service.mode == "500":
                    self.send_status(500)
                    return
                if service.mode == "slow":
                    time.sleep(0.8)
                hour = int(time.time() // 3600) * 3600
                if "/latest" in self.path:
                    body = {"zone": "DE", "carbonIntensity": 321}
                else:
                    body = {"zone": "DE", "history": [
                        {"datetime": time.strftime("%Y-%m-%dT%H:00:00.000Z",
                                                   time.gmtime(hour - 3600)),
                         "carbonIntensity": 111}]}
                if service.mode == "nodata":  # the service's answer for a zone without data
                    body = {"error": 'No recent data for zone "US-MIDW-MISO"'}
                self.send_json(body if service.mode != "malformed" else '{"history": [')

        self.http = LocalHTTPServer(Handler)
        self.url = self.http.url + "/v3"

    def stop(self):
        self.http.stop()


@pytest.fixture
def service():
    fake = FakeService()
    yield fake
    fake.stop()


def client(service, **kwargs):
    options = dict(zone="DE", auth_token="t0ken", base_url=service.url, read_timeout_s=0.3,
                   connect_timeout_s=0.3, backoff_initial_s=0.01, max_attempts=2)
    options.update(kwargs)
    return ElectrictyMapsClient(**options)


def test_http_client_feeds_the_monitor(service):
    provider = client(service)
    assert provider.get_current_carbon_intensity() == 321.0
    assert service.tokens[-1] == "t0ken"
    recent = provider.get_recent_carbon_intensity()
    assert 111.0 in recent.values()
    assert provider.update_period.total_seconds() == 3600
    assert provider.history_length == 24
    monitor = CarbonEmissionMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    m = monitor.end_window("w")
    assert m.gpu_carbon_emission[0] == pytest.approx(kwh(m.gpu_energy[0]) * 321.0)
    # Location instead of zone, as the reference.
    located = ElectrictyMapsClient((48.1, 11.5), estimate=True, emission_factor_type="lifecycle",
                                   base_url=service.url)
    assert located.fetch_latest() == 321.0
    assert "emissionFactorType=lifecycle" in service.paths[-1]
    assert "disableEstimations=false" in service.paths[-1]
    assert (located.lat, located.long) == (48.1, 11.5)
    located.emission_factor_type = "direct"  # as the reference's test does
    assert located.emission_factor_type == "direct" and located.estimate is True
    located.fetch_latest()
    assert "emissionFactorType=direct" in service.paths[-1]
    assert "lat=48.1" in service.paths[-1] and "lon=11.5" in service.paths[-1]
    with pytest.raises(ValueError, match="both"):
        located.emission_factor_type = "both"


def test_http_500_is_a_clear_error_and_the_window_closes(service):
    service.mode = "500"
    provider = client(service)
    monitor = CarbonEmissionMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="HTTP 500"):
        monitor.end_window("w")
    monitor.begin_window("w")  # it was closed
    monitor.end_window("w", cancel=True)
    with pytest.raises(ZeusCarbonIntensityHTTPError):
        provider.fetch_latest()


def test_http_fallback_constant_malformed_and_slow(service):
    service.mode = "malformed"
    provider = client(service, fallback=450.0)
    assert provider.get_current_carbon_intensity() == 450.0
    assert "fallback" in provider.last_fallback_reason()
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="not valid JSON"):
        provider.fetch_history()

    service.mode = "slow"
    slow = client(service, fallback=42.0)
    start = time.monotonic()
    assert slow.get_current_carbon_intensity() == 42.0
    assert time.monotonic() - start < 3.0  # bounded by the timeouts, not the 0.8 s answers


def test_http_answer_without_the_value_is_not_found(service):
    service.mode = "nodata"
    provider = client(service)
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="carbonIntensity"):
        provider.fetch_latest()
    with pytest.raises(ZeusCarbonIntensityNotFoundError):
        provider.get_current_carbon_intensity()


def test_http_server_gone_mid_run_uses_the_last_known_value(service):
    provider = client(service)
    monitor = CarbonEmissionMonitor(provider, **NO_SYNC)
    monitor.begin_window("before")
    first = monitor.end_window("before")
    assert first.gpu_carbon_emission[0] == pytest.approx(kwh(first.gpu_energy[0]) * 321.0)
    service.stop()
    # The current hour is cached; an hour that is not (two hours ahead) falls back to it.
    later = time.time() + 7200
    assert provider.intensity_at(later) == 321.0
    assert "last known" in provider.last_fallback_reason()
    monitor.begin_window("after")
    assert monitor.end_window("after").gpu_carbon_emission[0] >= 0
