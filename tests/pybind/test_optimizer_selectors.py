"""The power-limit selectors, the Zeus cost and the profile file, through the Python API."""

from __future__ import annotations

import json
import math

import pytest

from zeus_cpp.optimizer.power_limit import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
    load_profile,
    save_profile,
)
from zeus_cpp.utils.metric import zeus_cost

M = PowerLimitMeasurement

# Highest power limit first, as the optimizer profiles them.
PROFILE = [M(300, 1000.0, 10.0), M(250, 900.0, 10.5), M(200, 850.0, 12.0), M(150, 950.0, 16.0)]


def test_measurement_fields_repr_and_equality():
    m = M(power_limit=250, energy=12.5, time=3.0)
    assert (m.power_limit, m.energy, m.time) == (250, 12.5, 3.0)
    assert m == M(250, 12.5, 3.0) and m != M(250, 12.5, 3.5)
    assert repr(m) == "PowerLimitMeasurement(power_limit=250, energy=12.5, time=3.0)"


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"power_limit": "250", "energy": 1.0, "time": 1.0}, TypeError, "power_limit"),
        ({"power_limit": 250, "energy": "1", "time": 1.0}, TypeError, "energy"),
        ({"power_limit": 250, "energy": 1.0, "time": None}, TypeError, "time"),
        ({"power_limit": 0, "energy": 1.0, "time": 1.0}, ValueError, "power_limit"),
        ({"power_limit": 250, "energy": math.nan, "time": 1.0}, ValueError, "energy"),
    ],
)
def test_measurement_bad_arguments_name_the_parameter(kwargs, error, name):
    with pytest.raises(error, match=name):
        M(**kwargs)


def test_energy_and_time():
    assert Energy().select(PROFILE) == 200
    assert Time().select(PROFILE) == 300


def test_ties_go_to_the_first_measurement():
    tied = [M(300, 100.0, 1.0), M(250, 100.0, 1.0), M(200, 100.0, 1.0)]
    for selector in (Energy(), Time(), ZeusCost(0.5), ZeusCost(1.0), ZeusCost(0.0)):
        assert selector.select(tied) == 300, selector


def test_zeus_cost_selector_matches_the_formula():
    for eta in (0.0, 0.25, 0.5, 0.75, 1.0):
        for world_size in (1, 4):
            max_power = 300 * world_size
            costs = [zeus_cost(m.energy, m.time, eta, max_power) for m in PROFILE]
            expected = PROFILE[costs.index(min(costs))].power_limit
            assert ZeusCost(eta_knob=eta, world_size=world_size).select(PROFILE) == expected
    assert ZeusCost(1.0).select(PROFILE) == 200  # energy only
    assert ZeusCost(0.0).select(PROFILE) == 300  # time only
    selector = ZeusCost(eta_knob=0.3, world_size=2)
    assert (selector.eta_knob, selector.world_size) == (0.3, 2)


def test_max_slowdown_constraint_uses_the_time_at_the_maximum_power_limit():
    assert MaxSlowdownConstraint(factor=1.0).select(PROFILE) == 300
    assert MaxSlowdownConstraint(factor=1.1).select(PROFILE) == 250
    assert MaxSlowdownConstraint(factor=1.2).select(PROFILE) == 200
    assert MaxSlowdownConstraint(factor=2.0).select(PROFILE) == 150
    assert MaxSlowdownConstraint(1.5).factor == 1.5


@pytest.mark.parametrize(
    ("make", "error", "name"),
    [
        (lambda: ZeusCost(eta_knob=1.5), ValueError, "eta_knob"),
        (lambda: ZeusCost(eta_knob=-0.1), ValueError, "eta_knob"),
        (lambda: ZeusCost(eta_knob="0.5"), TypeError, "eta_knob"),
        (lambda: ZeusCost(0.5, world_size=0), ValueError, "world_size"),
        (lambda: ZeusCost(0.5, world_size=1.5), TypeError, "world_size"),
        (lambda: MaxSlowdownConstraint(factor=0.9), ValueError, "factor"),
        (lambda: MaxSlowdownConstraint(factor=None), TypeError, "factor"),
        (lambda: Energy().select([]), ValueError, "measurements"),
        (lambda: Energy().select("300"), TypeError, "measurements"),
        (lambda: Energy().select([M(300, 1.0, 1.0), (250, 1.0, 1.0)]), TypeError, r"measurements\[1\]"),
    ],
)
def test_bad_selector_arguments(make, error, name):
    with pytest.raises(error, match=name):
        make()


def test_a_python_selector_subclass():
    class SecondHighest(OptimumSelector):
        def select(self, measurements):
            return sorted(m.power_limit for m in measurements)[-2]

    assert SecondHighest().select(PROFILE) == 250
    assert "SecondHighest" in repr(SecondHighest())


def test_zeus_cost_function():
    assert zeus_cost(energy=100.0, time=2.0, eta_knob=0.5, max_power=300) == pytest.approx(350.0)
    assert zeus_cost(100, 2, 1, 300) == 100
    with pytest.raises(ValueError, match="eta_knob"):
        zeus_cost(100.0, 2.0, 1.2, 300)
    with pytest.raises(TypeError, match="time"):
        zeus_cost(100.0, "2", 0.5, 300)


def test_profile_round_trip(tmp_path):
    path = tmp_path / "profile.json"
    save_profile(path, PROFILE)
    data = json.loads(path.read_text())
    assert [m["power_limit"] for m in data["measurements"]] == [300, 250, 200, 150]
    assert data["measurements"][1] == {"power_limit": 250, "energy": 900.0, "time": 10.5}
    assert load_profile(path) == PROFILE
    assert load_profile(str(path)) == PROFILE


def test_bad_profiles(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"measurements": [{"power_limit": 250, "energy": -1, "time": 1}]}')
    with pytest.raises(ValueError, match="bad.json"):
        load_profile(bad)
    with pytest.raises(TypeError, match="path"):
        load_profile(3)
