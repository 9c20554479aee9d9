"""The batch-size policies in process, without a server (zeus_cpp's extension).

The same decisions `zeus bso serve` takes, driven by the caller: ask `next()` for a trial, train
with its batch size (stopping early once the run's cost passes `cost_threshold(trial_id)`), then
`report()` its cost, or `fail()` it when the run crashed. Several trials may be in flight and
their reports may come in any order. `save()` gives the exact state as JSON text and
`BatchSizePolicy.restore(text)` resumes it, so a recurring job can keep its policy in a file
between runs::

    from zeus_cpp.optimizer.batch_size.policy import BatchSizePolicy

    policy = BatchSizePolicy([32, 64, 128, 256], 128, policy="low-regret", seed=1)
    trial_id, batch_size, kind = policy.next()
    cost = train(batch_size, stop_above=policy.cost_threshold(trial_id))
    policy.report(trial_id, cost, converged=True, epochs=12)
    state = policy.save()                       # ... next recurrence:
    policy = BatchSizePolicy.restore(state)

Two policies (docs/python-optimizers.md): "zeus", the paper's (pruning, then Gaussian Thompson
Sampling; the default), and "low-regret" (a capped single walk from the default batch size, then
Thompson Sampling over a pooled-noise model of each batch size's cost). Errors of the core (a bad
configuration, an unknown trial, a malformed state, no batch size that reaches the target) are
ValueError with the core's message.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence

from zeus_cpp import _zeus
from zeus_cpp.utils._checks import check_int, check_str

__all__ = ["POLICIES", "Trial", "Arm", "BatchSizePolicy"]

# The policy names, from the C++ registry (optimizer::batch_size_policy_names()), their only copy.
POLICIES: tuple[str, ...] = _zeus._BATCH_SIZE_POLICIES


class Trial(NamedTuple):
    """A trial to run: its id (1, 2, ...), its batch size, and why it runs ("Exploration",
    "Concurrent" or "MAB", as the server's trials)."""

    trial_id: int
    batch_size: int
    kind: str


class Arm(NamedTuple):
    """A batch size as the policy sees it: how many runs it learnt from and its estimate of one
    run's cost (the paper's policy: its bandit arms, once pruning is over)."""

    batch_size: int
    observations: int
    mean_cost: float




class BatchSizePolicy:
    """A batch-size policy, "zeus" (the paper's) or "low-regret".

    Args:
        batch_sizes: The candidate batch sizes (any order, each once).
        default_batch_size: The batch size tried first; one of `batch_sizes`.
        policy: "zeus" or "low-regret".
        beta: Early stopping: a run is stopped once its cost passes beta x the best cost
            ("zeus": the lowest single cost; "low-regret": the best mean cost, for bandit runs).
            None: never.
        window_size: Learn only from each batch size's latest runs (0: all of them).
        seed: Seed of the policy's random generator (the decisions are deterministic given it).
        pruning_rounds, prior_mean, prior_precision, num_explorations: "zeus" only: rounds of
            pruning, and the Gaussian bandit's prior and explorations per arm (the reference's
            num_pruning_rounds, mab_prior_mean, mab_prior_precision, mab_num_explorations).
        probe_cap, noise_prior, noise_prior_weight, drift_z, shrinkage_floor, arm_noise_weight:
            "low-regret" only;
            None keeps the core's default. probe_cap: a batch size's first run is stopped once
            its cost passes probe_cap x the best mean cost. noise_prior, noise_prior_weight: the
            prior of the relative run-to-run noise and how many runs it is worth. drift_z: how
            surprising (in predictive standard deviations) a cost must be, twice in a row, to be
            taken as drift (0: never). shrinkage_floor: the least spread (log units) assumed
            between batch sizes' mean epochs. arm_noise_weight: how many runs the pooled noise
            is worth as the prior of each batch size's own spread.
    """

    def __init__(
        self,
        batch_sizes: Sequence[int],
        default_batch_size: int,
        policy: str = "zeus",
        beta: Optional[float] = 2.0,
        window_size: int = 0,
        seed: int = 0,
        pruning_rounds: int = 2,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        num_explorations: int = 2,
        probe_cap: Optional[float] = None,
        noise_prior: Optional[float] = None,
        noise_prior_weight: Optional[float] = None,
        drift_z: Optional[float] = None,
        shrinkage_floor: Optional[float] = None,
        arm_noise_weight: Optional[float] = None,
    ) -> None:
        if isinstance(batch_sizes, (str, bytes)) or not hasattr(batch_sizes, "__iter__"):
            raise TypeError(f"batch_sizes must be a list of int, not {type(batch_sizes).__name__}")
        sizes = [check_int(f"batch_sizes[{i}]", size) for i, size in enumerate(batch_sizes)]
        check_str("policy", policy)
        low_regret = {
            name: float(value)
            for name, value in (
                ("probe_cap", probe_cap),
                ("noise_prior", noise_prior),
                ("noise_prior_weight", noise_prior_weight),
                ("drift_z", drift_z),
                ("shrinkage_floor", shrinkage_floor),
                ("arm_noise_weight", arm_noise_weight),
            )
            if value is not None
        }
        self._impl = _zeus._BatchSizePolicy(
            sizes,
            check_int("default_batch_size", default_batch_size),
            policy=policy,
            beta=None if beta is None else float(beta),
            window_size=check_int("window_size", window_size),
            seed=check_int("seed", seed, minimum=0),
            pruning_rounds=check_int("pruning_rounds", pruning_rounds),
            prior_mean=float(prior_mean),
            prior_precision=float(prior_precision),
            num_explorations=check_int("num_explorations", num_explorations),
            **low_regret,
        )

    @classmethod
    def restore(cls, text: str) -> "BatchSizePolicy":
        """The policy `save()` gave `text` (either kind; a state saved before there were two
        policies is the paper's). ValueError when the text is not such a state."""
        check_str("text", text)
        policy = cls.__new__(cls)
        policy._impl = _zeus._BatchSizePolicy.restore(text)
        return policy

    def save(self) -> str:
        """The exact state as JSON text (with a "policy" member)."""
        return self._impl.save()

    def next(self) -> Trial:
        """The next trial to run. ValueError when exploration found no batch size that reaches
        the target (fix the target or the batch sizes)."""
        return Trial(*self._impl.next())

    def report(self, trial_id: int, cost: float, converged: bool, epochs: int = 0, epoch_cost: float = 0.0) -> None:
        """A finished run: its cost (e.g. zeus_cpp's Zeus cost, every epoch included) and
        whether it reached the target. `epochs` run and `epoch_cost` (the cost of one steady
        epoch) let "low-regret" separate the per-epoch cost from the noisy number of epochs; 0
        when unknown (epoch_cost then defaults to cost / epochs). ValueError for an unknown
        trial, one already reported, or a cost that is not a finite non-negative number."""
        if not isinstance(converged, bool):
            raise TypeError(f"converged must be a bool, not {type(converged).__name__}")
        self._impl.report(check_int("trial_id", trial_id), float(cost), converged,
                          check_int("epochs", epochs, minimum=0), float(epoch_cost))  # fmt: skip

    def fail(self, trial_id: int) -> None:
        """A run that crashed before reporting: forgotten, so its batch size can be tried again."""
        self._impl.fail(check_int("trial_id", trial_id))

    def cost_threshold(self, trial_id: int) -> Optional[float]:
        """The cost at which the running trial should be stopped; None: never (or unknown)."""
        return self._impl.cost_threshold(check_int("trial_id", trial_id))

    @property
    def policy(self) -> str:
        """"zeus" or "low-regret"."""
        return self._impl.policy

    @property
    def best_batch_size(self) -> int:
        """The batch size the policy believes best now (the default one before any result)."""
        return self._impl.best_batch_size

    @property
    def min_cost(self) -> Optional[float]:
        """The lowest cost of a converged run so far."""
        return self._impl.min_cost

    @property
    def exploring(self) -> bool:
        """True while batch sizes are still being tried for the first time (the server's
        "Pruning" stage)."""
        return self._impl.exploring

    @property
    def arms(self) -> List[Arm]:
        """Each batch size the policy chooses among, ascending."""
        return [Arm(*arm) for arm in self._impl.arms]

    @property
    def batch_sizes(self) -> List[int]:
        return list(self._impl.batch_sizes)

    @property
    def default_batch_size(self) -> int:
        return self._impl.default_batch_size

    def __copy__(self) -> "BatchSizePolicy":
        policy = type(self).__new__(type(self))
        policy._impl = self._impl.copy()
        return policy

    def __deepcopy__(self, memo: Any) -> "BatchSizePolicy":
        return self.__copy__()

    def __getstate__(self) -> dict:
        return {"state": self.save()}

    def __setstate__(self, state: dict) -> None:
        self._impl = _zeus._BatchSizePolicy.restore(state["state"])

    def __repr__(self) -> str:
        return (f"BatchSizePolicy(policy={self.policy!r}, batch_sizes={self.batch_sizes}, "
                f"best_batch_size={self.best_batch_size}, exploring={self.exploring})")  # fmt: skip
