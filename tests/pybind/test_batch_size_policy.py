"""zeus_cpp.optimizer.batch_size.policy: the batch-size policies in process, without a server."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from zeus_cpp.optimizer.batch_size.policy import POLICIES, Arm, BatchSizePolicy, Trial

# A toy workload: per-epoch cost and epochs to reach the target (0: never) per batch size; the
# cheapest run is 128 (3.0 x 10 = 30).
EPOCH_COST = {16: 9.0, 32: 6.0, 64: 4.0, 128: 3.0, 256: 2.5, 512: 2.2}
EPOCHS = {16: 6, 32: 7, 64: 9, 128: 10, 256: 16, 512: 0}
MAX_EPOCHS = 30


def train(policy: BatchSizePolicy, trial_id: int, batch_size: int, noise: float = 0.0) -> None:
    """Runs the trial epoch by epoch, stopping at the policy's threshold, and reports it."""
    threshold = policy.cost_threshold(trial_id)
    target = EPOCHS[batch_size] + (round(noise) if EPOCHS[batch_size] else 0)
    for epoch in range(1, MAX_EPOCHS + 1):
        cost = EPOCH_COST[batch_size] * epoch
        if threshold is not None and cost > threshold:
            policy.report(trial_id, cost, False, epochs=epoch, epoch_cost=EPOCH_COST[batch_size])
            return
        if target and epoch >= target:
            policy.report(trial_id, cost, True, epochs=epoch, epoch_cost=EPOCH_COST[batch_size])
            return
    policy.report(trial_id, EPOCH_COST[batch_size] * MAX_EPOCHS, False, epochs=MAX_EPOCHS)


def make(name: str, **kwargs) -> BatchSizePolicy:
    return BatchSizePolicy(list(EPOCH_COST), 64, policy=name, seed=7, **kwargs)


@pytest.mark.parametrize("name", POLICIES)
def test_a_loop_of_next_and_report_finds_the_cheapest_batch_size(name):
    policy = make(name)
    assert policy.policy == name
    assert policy.exploring
    assert policy.best_batch_size == 64
    chosen = []
    for run in range(30):
        trial = policy.next()
        assert isinstance(trial, Trial)
        trial_id, batch_size, kind = trial
        assert kind in ("Exploration", "Concurrent", "MAB")
        chosen.append(batch_size)
        train(policy, trial_id, batch_size, noise=(run % 3) - 1)
    assert chosen[0] == 64  # the default batch size first
    assert not policy.exploring
    assert policy.best_batch_size == 128
    assert chosen[-10:].count(128) >= 8, chosen
    assert chosen.count(512) <= 2, chosen  # never converges: dropped after it was tried
    arms = policy.arms
    assert arms and all(isinstance(arm, Arm) for arm in arms)
    assert [arm.batch_size for arm in arms] == sorted(arm.batch_size for arm in arms)
    assert min(arms, key=lambda arm: arm.mean_cost).batch_size == 128


@pytest.mark.parametrize("name", POLICIES)
def test_save_and_restore_give_the_same_next_decisions(name):
    policy = make(name)
    for _ in range(5):
        trial_id, batch_size, _ = policy.next()
        train(policy, trial_id, batch_size)
    in_flight = policy.next()  # saved with a trial running
    text = policy.save()
    assert json.loads(text)["policy"] == name
    restored = BatchSizePolicy.restore(text)
    assert restored.policy == name
    assert restored.save() == text
    if name == "low-regret":
        tuned = make(name, probe_cap=1.25, arm_noise_weight=3.0)
        assert json.loads(tuned.save())["config"] != json.loads(make(name).save())["config"]
    for twin in (restored, copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))):
        assert twin.save() == text
    # Both go on identically: the in-flight trial's report, then new decisions.
    for p in (policy, restored):
        train(p, in_flight.trial_id, in_flight.batch_size)
    for _ in range(10):
        a, b = policy.next(), restored.next()
        assert a == b
        train(policy, a.trial_id, a.batch_size)
        train(restored, b.trial_id, b.batch_size)
    assert policy.save() == restored.save()


def test_a_state_saved_before_there_were_two_policies_is_the_papers():
    policy = make("zeus")
    trial_id, batch_size, _ = policy.next()
    train(policy, trial_id, batch_size)
    state = json.loads(policy.save())
    del state["policy"]
    legacy = BatchSizePolicy.restore(json.dumps(state))
    assert legacy.policy == "zeus"
    assert legacy.next() == policy.next()


def test_concurrent_trials_out_of_order_reports_and_a_crashed_trial():
    policy = make("low-regret")
    first = policy.next()
    train(policy, first.trial_id, first.batch_size)
    a, b, c = policy.next(), policy.next(), policy.next()
    assert len({a.trial_id, b.trial_id, c.trial_id}) == 3
    train(policy, c.trial_id, c.batch_size)
    policy.fail(b.trial_id)
    train(policy, a.trial_id, a.batch_size)
    with pytest.raises(ValueError):
        policy.report(b.trial_id, 1.0, True)  # forgotten when it crashed
    with pytest.raises(ValueError):
        policy.report(a.trial_id, 1.0, True)  # already reported
    for _ in range(20):
        trial_id, batch_size, _ = policy.next()
        train(policy, trial_id, batch_size)
    assert policy.best_batch_size == 128


def test_thresholds():
    policy = make("zeus", beta=2.0)
    trial_id, batch_size, _ = policy.next()
    assert policy.cost_threshold(trial_id) is None  # no converged run yet
    train(policy, trial_id, batch_size)
    trial_id, _, _ = policy.next()
    assert policy.cost_threshold(trial_id) == pytest.approx(2.0 * policy.min_cost)
    assert make("zeus", beta=None).cost_threshold(1) is None


def test_errors_are_value_errors_with_the_cores_message():
    with pytest.raises(ValueError, match="low-regret"):
        BatchSizePolicy([32, 64], 64, policy="greedy")
    with pytest.raises(ValueError):
        BatchSizePolicy([32, 64], 128)  # the default batch size is not a candidate
    with pytest.raises(ValueError):
        BatchSizePolicy([], 64)
    with pytest.raises(ValueError):
        BatchSizePolicy([32, 64], 64, policy="low-regret", probe_cap=0.5)
    with pytest.raises(ValueError):
        BatchSizePolicy([32, 64], 64, beta=float("nan"))
    with pytest.raises(ValueError, match="arm_noise_weight"):
        BatchSizePolicy([32, 64], 64, policy="low-regret", arm_noise_weight=float("inf"))
    with pytest.raises(TypeError):
        BatchSizePolicy([32, "64"], 64)
    policy = make("low-regret")
    with pytest.raises(ValueError):
        policy.report(99, 1.0, True)
    trial_id, _, _ = policy.next()
    with pytest.raises(ValueError):
        policy.report(trial_id, float("inf"), True)
    with pytest.raises(ValueError):
        policy.report(trial_id, 1.0, True, epochs=-1)
    with pytest.raises(ValueError):
        BatchSizePolicy.restore("not json")
    with pytest.raises(ValueError):
        BatchSizePolicy.restore('{"policy": "greedy"}')


def test_no_batch_size_reaches_the_target():
    policy = BatchSizePolicy([512], 512, policy="low-regret")
    trial_id, batch_size, _ = policy.next()
    train(policy, trial_id, batch_size)
    with pytest.raises(ValueError):
        for _ in range(5):
            trial_id, batch_size, _ = policy.next()
            train(policy, trial_id, batch_size)
