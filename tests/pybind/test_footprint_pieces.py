"""A Python provider's price_over / intensity_over answer that is not a tiling of the window by
(start, end, non-negative finite value) pieces is a clear TypeError or ValueError naming the
method, and the window closes (it can be opened again)."""

from __future__ import annotations

import time

import pytest

from local_http import NO_SYNC
from zeus_cpp.monitor.carbon import CarbonEmissionMonitor, CarbonIntensityProvider
from zeus_cpp.monitor.price import ElectricityPriceProvider, EnergyCostMonitor


def _price(answer):
    class Answer(ElectricityPriceProvider):
        def price_over(self, start, end):
            return answer(start, end)

    return EnergyCostMonitor(Answer(), **NO_SYNC), "price_over"


def _carbon(answer):
    class Answer(CarbonIntensityProvider):
        def intensity_over(self, start, end):
            return answer(start, end)

    return CarbonEmissionMonitor(Answer(), **NO_SYNC), "intensity_over"


HOSTILE = [
    (lambda s, e: None, TypeError, "must return a list"),
    (lambda s, e: "abc", TypeError, "must return a list"),
    (lambda s, e: {s: 1.0}, TypeError, "must return a list"),
    (lambda s, e: [(s, e)], TypeError, "tuples of numbers"),
    (lambda s, e: [(s, e, "x")], TypeError, "tuples of numbers"),
    (lambda s, e: [(s, e, float("nan"))], ValueError, "finite"),
    (lambda s, e: [(s, e, float("inf"))], ValueError, "finite"),
    (lambda s, e: [(s, e, -1.0)], ValueError, "non-negative"),
    (lambda s, e: [(float("nan"), e, 1.0)], ValueError, "finite"),
    (lambda s, e: [(e, s - 1.0, 1.0)], ValueError, "start <= end"),
    (lambda s, e: [(s - 10, s - 5, 1.0), (s, e, 1.0)], ValueError, "do not join"),
    (lambda s, e: [(s, e, 1.0), (s, e, 2.0)], ValueError, "do not join"),
    (lambda s, e: [(s + (e - s) / 2 + 1.0, e + 1.0, 1.0)], ValueError, "cover all"),
]


@pytest.mark.parametrize("make", [_price, _carbon])
@pytest.mark.parametrize("answer, error, message", HOSTILE)
def test_hostile_answers_are_clear_errors(make, answer, error, message):
    monitor, method = make(answer)
    monitor.begin_window("w")
    time.sleep(0.002)
    with pytest.raises(error, match=message) as raised:
        monitor.end_window("w")
    assert method in str(raised.value)
    monitor.begin_window("w")  # the failed window was closed


@pytest.mark.parametrize("make", [_price, _carbon])
def test_pieces_that_tile_are_weighed(make):
    monitor, _ = make(lambda s, e: ((a, b, v) for a, b, v in
                                    [(s - 60, (s + e) / 2, 1.0), ((s + e) / 2, e + 60, 3.0)]))
    monitor.begin_window("w")
    time.sleep(0.02)
    assert monitor.end_window("w").gpu_energy[0] > 0
