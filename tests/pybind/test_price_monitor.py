"""zeus_cpp.monitor.price on simulated GPUs: constant, tariff and Python providers (the reference's
get_current_electricity_prices() and our price_over), the reference's exception classes, and the
OpenEI client against a local HTTP server (a rate, a 500, a missing label, no API key)."""

from __future__ import annotations

import calendar
import json
import time
from urllib.parse import parse_qs, urlparse

import pytest

from local_http import NO_SYNC, LocalHTTPServer, QuietHandler, kwh
from zeus_cpp.exception import (
    ZeusBaseError,
    ZeusElectricityPriceHTTPError,
    ZeusElectricityPriceNotFoundError,
)
from zeus_cpp.monitor import price
from zeus_cpp.monitor.price import (
    ConstantElectricityPrice,
    ElectricityPriceProvider,
    EnergyCostMeasurement,
    EnergyCostMonitor,
    OpenEIClient,
    TariffElectricityPrice,
)


def utc(*fields: int) -> float:
    """Unix seconds of a UTC date and time (year, month, day, hour, minute)."""
    year, month, day, hour, minute = fields
    return float(calendar.timegm((year, month, day, hour, minute, 0)))


# 2024-01-03 is a Wednesday, 2024-01-06 a Saturday, 2024-07-03 a Wednesday.
WEDNESDAY, SATURDAY, JULY_WEDNESDAY = (2024, 1, 3), (2024, 1, 6), (2024, 7, 3)


def reference_rates(off_peak=0.1, adj=0.02, peak=0.3):
    """The reference's rate data: period 0 (rate + adj) all day except weekday afternoons
    12:00-24:00 (period 1), and in July every weekday hour is period 1."""
    weekday = [[0] * 12 + [1] * 12 for _ in range(12)]
    weekday[6] = [1] * 24
    return {
        "energy_rate_structure": [[{"rate": off_peak, "adj": adj}, {"rate": 9.0}],
                                  [{"rate": peak}]],
        "energy_weekday_schedule": weekday,
        "energy_weekend_schedule": [[0] * 24 for _ in range(12)],
    }


def test_reference_names():
    assert price.ZeusElectricityPriceHTTPError is ZeusElectricityPriceHTTPError
    assert issubclass(ZeusElectricityPriceHTTPError, ZeusBaseError)
    assert issubclass(ZeusElectricityPriceNotFoundError, ZeusBaseError)
    for name in price.__all__:
        assert hasattr(price, name), name
    for provider in (ConstantElectricityPrice(0.1), TariffElectricityPrice([], 0.1)):
        assert isinstance(provider, ElectricityPriceProvider)
    assert issubclass(OpenEIClient, ElectricityPriceProvider)
    fields = EnergyCostMeasurement.__dataclass_fields__
    assert list(fields)[:7] == ["time", "gpu_energy", "gpu_energy_cost", "cpu_energy",
                                "cpu_energy_cost", "dram_energy", "dram_energy_cost"]


def test_constant_price_costs_energy_times_price_per_gpu():
    monitor = EnergyCostMonitor(ConstantElectricityPrice(0.25, "USD"), **NO_SYNC)
    assert monitor.gpu_indices == [0, 1]
    monitor.begin_window("step")
    time.sleep(0.05)
    m = monitor.end_window("step")
    assert isinstance(m, EnergyCostMeasurement)
    assert set(m.gpu_energy) == {0, 1}
    for gpu, energy in m.gpu_energy.items():
        assert energy > 0
        assert m.gpu_energy_cost[gpu] == pytest.approx(energy * 0.25 / 3.6e6)
    assert m.total_energy_cost == pytest.approx(sum(m.gpu_energy_cost.values()))
    assert (m.mean_price_per_kwh, m.currency) == (0.25, "USD")
    assert m.cpu_energy_cost is None and m.dram_energy_cost is None  # none measured here
    monitor.begin_window("step")
    cancelled = monitor.end_window("step", cancel=True)
    assert all(v == 0 for v in cancelled.gpu_energy_cost.values())

    one = EnergyCostMonitor(ConstantElectricityPrice(1.0), gpu_indices=[1], **NO_SYNC)
    one.begin_window("w")
    assert set(one.end_window("w").gpu_energy_cost) == {1}


def test_an_existing_energy_monitor_can_be_priced():
    from zeus_cpp.monitor import ZeusMonitor

    energy = ZeusMonitor(gpu_indices=[1], approx_instant_energy=True, **NO_SYNC)
    monitor = EnergyCostMonitor(ConstantElectricityPrice(2.0), monitor=energy)
    assert monitor.zeus_monitor is energy and monitor.gpu_indices == [1]
    monitor.begin_window("w")
    assert "w" in energy.open_windows()
    m = monitor.end_window("w")
    assert m.gpu_energy_cost == {1: pytest.approx(kwh(m.gpu_energy[1]) * 2.0)}
    assert energy.open_windows() == []


def test_window_errors_are_value_errors_as_the_reference():
    monitor = EnergyCostMonitor(ConstantElectricityPrice(0.1), **NO_SYNC)
    monitor.begin_window("w")
    with pytest.raises(ValueError, match="'w' is already open"):
        monitor.begin_window("w")
    with pytest.raises(ValueError, match="no open window named 'nope'"):
        monitor.end_window("nope")
    monitor.end_window("w")
    with pytest.raises(ValueError):
        monitor.end_window("w")
    # Two windows at once, each priced on its own.
    monitor.begin_window("outer")
    monitor.begin_window("inner")
    inner = monitor.end_window("inner")
    outer = monitor.end_window("outer")
    assert outer.time >= inner.time


def test_tariff_across_a_period_boundary(tmp_path):
    path = tmp_path / "tariff.json"
    path.write_text(json.dumps({
        "currency": "USD", "timezone_offset_hours": -5, "default_price_per_kwh": 0.12,
        "periods": [{"days": "mon-fri", "start": "16:00", "end": "21:00", "price_per_kwh": 0.32}],
    }))
    tariff = TariffElectricityPrice.from_file(str(path))
    assert (tariff.currency(), tariff.timezone_offset_hours, tariff.default_price_per_kwh) == (
        "USD", -5.0, 0.12)
    # 15:30 to 16:30 local (UTC-5) on a Wednesday: half off-peak, half peak.
    start = utc(*WEDNESDAY, 20, 30)
    pieces = tariff.price_over(start, start + 3600)
    assert pieces == [(start, start + 1800, 0.12), (start + 1800, start + 3600, 0.32)]
    assert tariff.price_at(utc(*SATURDAY, 21, 30)) == 0.12  # weekends are off-peak

    # The same tariff built in Python, and one whose price now is known, in a monitor.
    inline = TariffElectricityPrice(
        [{"days": "mon-fri", "start": "16:00", "end": "21:00", "price_per_kwh": 0.32}], 0.12,
        timezone_offset_hours=-5, currency="USD")
    assert inline.price_over(start, start + 3600) == pieces
    flat = TariffElectricityPrice([{"days": "all", "start": "00:00", "end": "24:00",
                                    "price_per_kwh": 0.4}], 0.1)
    monitor = EnergyCostMonitor(flat, gpu_indices=[0], **NO_SYNC)
    monitor.begin_window("w")
    m = monitor.end_window("w")
    assert m.gpu_energy_cost[0] == pytest.approx(kwh(m.gpu_energy[0]) * 0.4)

    bad = tmp_path / "bad.json"
    bad.write_text('{"default_price_per_kwh": 0.1, "periods": [{"start": "25:00"}]}')
    with pytest.raises(ValueError, match="bad.json"):
        TariffElectricityPrice.from_file(str(bad))
    with pytest.raises(ValueError, match="period 0"):
        TariffElectricityPrice([{"start": "10:00", "end": "09:00", "price_per_kwh": 1}], 0.1)


def test_a_window_across_a_tariff_boundary_is_priced_by_time():
    # A tariff whose local noon (where 0.1 becomes 0.5) falls 0.3 s from now: its UTC offset is
    # chosen so (any offset within +-14 h is allowed, not only whole hours).
    boundary = time.time() + 0.3
    offset_hours = ((43200 - boundary % 86400) / 3600 + 12) % 24 - 12
    tariff = TariffElectricityPrice(
        [{"days": "all", "start": "12:00", "end": "24:00", "price_per_kwh": 0.5}], 0.1,
        timezone_offset_hours=offset_hours)
    monitor = EnergyCostMonitor(tariff, **NO_SYNC)
    before_begin = time.time()
    monitor.begin_window("w")
    after_begin = time.time()
    time.sleep(max(0.0, boundary + 0.3 - time.time()))
    before_end = time.time()
    m = monitor.end_window("w")
    after_end = time.time()
    assert after_begin < boundary < before_end

    def mean(start, end):
        return (0.1 * (boundary - start) + 0.5 * (end - boundary)) / (end - start)

    # The window's wall times lie between the readings around begin_window and end_window, and
    # the mean grows with both.
    low, high = mean(before_begin, before_end), mean(after_begin, after_end)
    assert low - 1e-4 <= m.mean_price_per_kwh <= high + 1e-4  # (Unix-second rounding)
    assert 0.1 < low and high < 0.5
    for gpu, energy in m.gpu_energy.items():
        assert m.gpu_energy_cost[gpu] == pytest.approx(kwh(energy) * m.mean_price_per_kwh)


def test_python_provider_with_price_over_is_apportioned_by_time():
    class Halves(ElectricityPriceProvider):
        """0.1 in the window's first half, 0.5 in its second."""

        def price_over(self, start, end):
            middle = (start + end) / 2
            return [(start, middle, 0.1), (middle, end, 0.5)]

        def currency(self):
            return "EUR"

    monitor = EnergyCostMonitor(Halves(), **NO_SYNC)
    monitor.begin_window("w")
    time.sleep(0.02)
    m = monitor.end_window("w")
    assert m.currency == "EUR"
    # (Unix seconds near 1.8e9 leave the halves of a 20 ms window equal to about 1e-5.)
    assert m.mean_price_per_kwh == pytest.approx(0.3, rel=1e-3)
    assert m.gpu_energy_cost[0] == pytest.approx(kwh(m.gpu_energy[0]) * m.mean_price_per_kwh)

    class Empty(ElectricityPriceProvider):
        def price_over(self, start, end):
            return []

    with pytest.raises(ZeusElectricityPriceNotFoundError, match="no price"):
        Empty().price_at(0.0)


def test_python_provider_with_the_reference_interface():
    class Reference(ElectricityPriceProvider):
        timezone_offset_hours = 0.0

        def get_current_electricity_prices(self):
            return reference_rates()

    provider = Reference()
    # First tier's rate + adj, by the local (here UTC) month, day type and hour.
    assert provider.price_at(utc(*WEDNESDAY, 9, 30)) == pytest.approx(0.12)
    assert provider.price_at(utc(*WEDNESDAY, 13, 0)) == pytest.approx(0.3)
    assert provider.price_at(utc(*SATURDAY, 13, 0)) == pytest.approx(0.12)
    assert provider.price_at(utc(*JULY_WEDNESDAY, 9, 30)) == pytest.approx(0.3)
    start = utc(*WEDNESDAY, 11, 30)
    assert provider.price_over(start, start + 3600) == [
        (start, start + 1800, pytest.approx(0.12)), (start + 1800, start + 3600, 0.3)]
    assert provider.currency() == ""
    monitor = EnergyCostMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    m = monitor.end_window("w")
    expected = provider.price_at(time.time())
    assert m.gpu_energy_cost[0] == pytest.approx(kwh(m.gpu_energy[0]) * expected, rel=1e-6)

    # An object written against the reference, not a subclass of ours, is accepted too.
    class Duck:
        timezone_offset_hours = 0.0

        def get_current_electricity_prices(self):
            return reference_rates()

    duck = EnergyCostMonitor(Duck(), **NO_SYNC)
    duck.begin_window("w")
    assert duck.end_window("w").gpu_energy_cost[0] >= 0

    class Nothing(ElectricityPriceProvider):
        pass

    with pytest.raises(TypeError, match="price_over"):
        Nothing().price_at(0.0)
    with pytest.raises(TypeError, match="ElectricityPriceProvider"):
        EnergyCostMonitor(object(), **NO_SYNC)


def test_malformed_reference_rates_are_not_found_and_close_the_window():
    class Broken(ElectricityPriceProvider):
        def get_current_electricity_prices(self):
            rates = reference_rates()
            rates["energy_weekday_schedule"][3][5] = 7  # no such period
            return rates

    monitor = EnergyCostMonitor(Broken(), **NO_SYNC)
    monitor.begin_window("w")
    with pytest.raises(ZeusElectricityPriceNotFoundError, match="hour 5: 7 is not a period index"):
        monitor.end_window("w")
    monitor.begin_window("w")  # it was closed
    monitor.end_window("w", cancel=True)

    class Missing(ElectricityPriceProvider):
        def get_current_electricity_prices(self):
            return {"energy_rate_structure": [[{"rate": 1.0}]]}

    with pytest.raises(ZeusElectricityPriceNotFoundError, match="energy_weekday_schedule"):
        Missing().price_at(0.0)


def test_every_provider_describes_itself_as_the_reference_s_rate_data():
    rates = ConstantElectricityPrice(0.2).get_current_electricity_prices()
    assert rates["energy_rate_structure"] == [[{"rate": 0.2}]]
    assert rates["energy_weekday_schedule"] == [[0] * 24] * 12
    assert rates["energy_weekend_schedule"] == [[0] * 24] * 12
    tariff = TariffElectricityPrice(
        [{"days": "mon-fri", "start": "16:00", "end": "21:00", "price_per_kwh": 0.32}], 0.12)
    rates = tariff.get_current_electricity_prices()
    assert rates["energy_rate_structure"] == [[{"rate": 0.12}], [{"rate": 0.32}]]
    assert rates["energy_weekday_schedule"][0] == [0] * 16 + [1] * 5 + [0] * 3
    assert rates["energy_weekend_schedule"][0] == [0] * 24


# ---- OpenEI against a local server ---------------------------------------------------------

LABEL = "5a0c1e2b3d4f5a6b7c8d9e0f"


class FakeOpenEI:
    """An OpenEI utility_rates-shaped server on loopback (the documented v7 answer: "items",
    each with "label", "name", "utility", "energyratestructure" and the two schedules)."""

    def __init__(self):
        self.mode = "ok"
        self.queries = []
        service = self

        class Handler(QuietHandler):
            def do_GET(self):
                url = urlparse(self.path)
                service.queries.append((url.path, parse_qs(url.query)))
                if service.mode == "500":
                    self.send_status(500)
                    return
                rates = reference_rates()
                item = {
                    "label": LABEL, "name": "Residential Time of Use", "utility": "Test Power",
                    "sector": "Residential",
                    "energyratestructure": rates["energy_rate_structure"],
                    "energyweekdayschedule": rates["energy_weekday_schedule"],
                    "energyweekendschedule": rates["energy_weekend_schedule"],
                }
                other = dict(item, label="another-rate", energyratestructure=[[{"rate": 5.0}]])
                items = [other] if service.mode == "nolabel" else [other, item]
                self.send_json({"items": items})

        self.http = LocalHTTPServer(Handler)
        self.url = self.http.url

    def stop(self):
        self.http.stop()


@pytest.fixture
def openei():
    fake = FakeOpenEI()
    yield fake
    fake.stop()


def client(service, **kwargs):
    options = dict(api_key="s3cret-key", base_url=service.url, timezone_offset_hours=0.0,
                   read_timeout_s=0.5, connect_timeout_s=0.5, backoff_initial_s=0.01,
                   max_attempts=2)
    options.update(kwargs)
    return OpenEIClient((42.28, -83.74), LABEL, **options)


def test_openei_rate_feeds_the_monitor(openei):
    provider = client(openei, sector="Residential", radius=5)
    assert (provider.lat, provider.long, provider.label, provider.radius) == (
        42.28, -83.74, LABEL, 5)
    assert provider.price_at(utc(*WEDNESDAY, 9, 30)) == pytest.approx(0.12)
    assert provider.price_at(utc(*WEDNESDAY, 13, 0)) == pytest.approx(0.3)
    assert provider.price_at(utc(*SATURDAY, 13, 0)) == pytest.approx(0.12)
    assert provider.currency() == "USD"
    path, query = openei.queries[-1]
    assert path == "/utility_rates"
    assert query["api_key"] == ["s3cret-key"] and query["sector"] == ["Residential"]
    assert query["lat"] == ["42.28"] and query["lon"] == ["-83.74"]
    assert query["radius"] == ["5"] and query["detail"] == ["full"]
    tariff = provider.fetch_tariff()
    assert isinstance(tariff, TariffElectricityPrice)
    assert tariff.price_at(utc(*JULY_WEDNESDAY, 9, 30)) == pytest.approx(0.3)
    # The reference's accessor, read back from the converted rate (first tier: rate + adj).
    rates = provider.get_current_electricity_prices()
    structure = rates["energy_rate_structure"]
    january = [structure[i][0]["rate"] for i in rates["energy_weekday_schedule"][0]]
    assert january == pytest.approx([0.12] * 12 + [0.3] * 12)
    july = [structure[i][0]["rate"] for i in rates["energy_weekday_schedule"][6]]
    assert july == pytest.approx([0.3] * 24)
    assert len(rates["energy_weekend_schedule"]) == 12

    sent = provider.requests_sent()
    monitor = EnergyCostMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    m = monitor.end_window("w")
    expected = provider.price_at(time.time())
    assert m.gpu_energy_cost[0] == pytest.approx(kwh(m.gpu_energy[0]) * expected, rel=1e-6)
    assert m.currency == "USD"
    assert provider.requests_sent() == sent  # the rate is kept, not fetched per window


def test_openei_500_is_the_reference_s_http_error(openei):
    openei.mode = "500"
    provider = client(openei)
    monitor = EnergyCostMonitor(provider, **NO_SYNC)
    monitor.begin_window("w")
    with pytest.raises(ZeusElectricityPriceHTTPError, match="500") as raised:
        monitor.end_window("w")
    assert "s3cret-key" not in str(raised.value)
    monitor.begin_window("w")  # the energy window was closed
    monitor.end_window("w", cancel=True)
    with pytest.raises(ZeusElectricityPriceHTTPError):
        provider.fetch_tariff()
    assert provider.requests_sent() >= 2  # retried

    fallback = client(openei, fallback=0.2)
    assert fallback.price_at(time.time()) == 0.2
    assert "fallback" in fallback.last_fallback_reason()


def test_openei_label_missing_is_not_found(openei):
    openei.mode = "nolabel"
    provider = client(openei)
    with pytest.raises(ZeusElectricityPriceNotFoundError, match=LABEL):
        provider.fetch_tariff()
    with pytest.raises(ZeusElectricityPriceNotFoundError):
        provider.price_at(time.time())


def test_openei_needs_an_api_key(openei, monkeypatch):
    monkeypatch.delenv("OPENEI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENEI_API_KEY"):
        OpenEIClient((42.28, -83.74), LABEL, base_url=openei.url)
    monkeypatch.setenv("OPENEI_API_KEY", "from-the-environment")
    provider = OpenEIClient((42.28, -83.74), LABEL, base_url=openei.url,
                            timezone_offset_hours=0.0)
    provider.fetch_tariff()
    assert openei.queries[-1][1]["api_key"] == ["from-the-environment"]
    with pytest.raises(ValueError, match="label"):
        OpenEIClient((42.28, -83.74), "", base_url=openei.url)
