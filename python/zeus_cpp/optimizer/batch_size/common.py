"""The batch-size-optimizer job model (the reference's `zeus.optimizer.batch_size.common`).

`JobSpec` is what a training script gives `BatchSizeOptimizer`; the client adds the GPU
configuration (`GpuConfig`) from the monitored GPUs and the server answers the stored job
(`CreatedJob`, with `job_id` set). Fields and defaults are the reference's; validation happens at
construction and raises TypeError / ValueError naming the field.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Optional, List

from zeus_cpp.utils._checks import check_float, check_int, check_str

__all__ = [
    "JobParams",
    "JobSpec",
    "GpuConfig",
    "JobSpecFromClient",
    "CreatedJob",
    "TrialId",
    "TrainingResult",
    "ReportResponse",
]


def _keyword_only(cls: type) -> type:
    """A dataclass whose constructor takes every field by keyword (as pydantic models do), with
    defaults allowed before required fields; works on Python 3.9 (no dataclass kw_only)."""
    cls = dataclass(init=False)(cls)
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
        for f in fields:
            if f.name in kwargs:
                value = kwargs[f.name]
            elif f.default is not dataclasses.MISSING:
                value = f.default
            else:
                raise TypeError(f"{cls.__name__}: the field {f.name} is required")
            setattr(self, f.name, value)
        self.__post_init__()

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=f.type,
        )
        for f in fields
    ]
    __init__.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = __init__  # type: ignore[misc]
    return cls


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


@_keyword_only
class JobParams:
    """A recurring job's parameters.

    Args:
        job_id: The job's id; the server assigns "<job_id_prefix>-<8 hex digits>" when None.
        job_id_prefix: Prefix of the job id (the id must start with it).
        batch_sizes: Candidate batch sizes (sorted on validation).
        default_batch_size: The batch size to try first; one of `batch_sizes`.
        eta_knob: Weight of energy against time in the Zeus cost, in [0, 1].
        beta_knob: Early stop when a trial's cost exceeds beta * the best cost; None: never.
        target_metric: The validation metric that means converged.
        higher_is_better_metric: Whether a higher metric is better.
        max_epochs: A trial that has not converged after this many epochs fails.
        num_pruning_rounds: Rounds of pruning exploration before the bandit (Thompson sampling).
        window_size: How many recent trials the bandit looks at (0: all).
        mab_prior_mean: Prior mean of the Gaussian bandit.
        mab_prior_precision: Prior precision of the Gaussian bandit.
        mab_num_explorations: Explorations of each arm before sampling.
        mab_seed: Seed of the bandit's random generator (None: unseeded).
        policy: The batch-size policy, by name: "zeus" (the paper's) or "low-regret" (zeus_cpp's
            extension; the reference's server ignores it). None: the server's default
            (`zeus bso serve --policy`); the created job names the one it runs.
    """

    job_id: Optional[str] = None
    job_id_prefix: str
    batch_sizes: List[int]
    default_batch_size: int
    eta_knob: float = 0.5
    beta_knob: Optional[float] = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: int = 100
    num_pruning_rounds: int = 2
    window_size: int = 0
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = 0.0
    mab_num_explorations: int = 2
    mab_seed: Optional[int] = None
    policy: Optional[str] = None

    def __post_init__(self) -> None:
        if self.job_id is not None:
            check_str("job_id", self.job_id, non_empty=True)
        check_str("job_id_prefix", self.job_id_prefix, non_empty=True)
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise ValueError(
                f"job_id {self.job_id!r} must start with job_id_prefix {self.job_id_prefix!r}"
            )
        if isinstance(self.batch_sizes, (str, bytes)) or not hasattr(self.batch_sizes, "__iter__"):
            raise TypeError(
                f"batch_sizes must be a list of int, not {type(self.batch_sizes).__name__}"
            )
        sizes = [check_int(f"batch_sizes[{i}]", size, minimum=1) for i, size in enumerate(self.batch_sizes)]
        if not sizes:
            raise ValueError("batch_sizes must not be empty")
        self.batch_sizes = sorted(sizes)
        self.default_batch_size = check_int("default_batch_size", self.default_batch_size, minimum=1)
        if self.default_batch_size not in self.batch_sizes:
            raise ValueError(
                f"default_batch_size {self.default_batch_size} must be one of batch_sizes {self.batch_sizes}"
            )
        self.eta_knob = check_float("eta_knob", self.eta_knob, minimum=0.0, maximum=1.0)
        if self.beta_knob is not None:
            self.beta_knob = check_float("beta_knob", self.beta_knob, positive=True)
        self.target_metric = check_float("target_metric", self.target_metric)
        _check_bool("higher_is_better_metric", self.higher_is_better_metric)
        self.max_epochs = check_int("max_epochs", self.max_epochs, minimum=1)
        self.num_pruning_rounds = check_int("num_pruning_rounds", self.num_pruning_rounds, minimum=0)
        self.window_size = check_int("window_size", self.window_size)
        self.mab_prior_mean = check_float("mab_prior_mean", self.mab_prior_mean)
        self.mab_prior_precision = check_float("mab_prior_precision", self.mab_prior_precision, minimum=0.0)
        self.mab_num_explorations = check_int("mab_num_explorations", self.mab_num_explorations, minimum=0)
        if self.mab_seed is not None:
            self.mab_seed = check_int("mab_seed", self.mab_seed)
        if self.policy is not None:
            # The server is the judge of the name (it answers 422 naming the ones it knows).
            check_str("policy", self.policy, non_empty=True)

    def dict(self) -> dict[str, Any]:
        """The fields as a dict (pydantic v1's name)."""
        return dataclasses.asdict(self)


@_keyword_only
class JobSpec(JobParams):
    """The job a training script registers (`job_id` optional)."""


@_keyword_only
class GpuConfig:
    """The GPUs of the job: `max_power` (W) = the maximum power limit times `number_of_gpus`."""

    max_power: float
    number_of_gpus: int
    gpu_model: str

    def __post_init__(self) -> None:
        self.max_power = check_float("max_power", self.max_power, positive=True)
        self.number_of_gpus = check_int("number_of_gpus", self.number_of_gpus, minimum=1)
        check_str("gpu_model", self.gpu_model, non_empty=True)

    def dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@_keyword_only
class JobSpecFromClient(JobSpec, GpuConfig):
    """What the client sends to POST /jobs: the spec plus the GPU configuration."""

    def __post_init__(self) -> None:
        JobSpec.__post_init__(self)
        GpuConfig.__post_init__(self)


@_keyword_only
class CreatedJob(JobSpecFromClient):
    """The job as the server stored it (`job_id` set)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.job_id is None:
            raise ValueError("job_id must be set in a created job")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CreatedJob":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass
class TrialId:
    """One trial of a job: the batch size it runs with and its number (from 1)."""

    job_id: str
    batch_size: int
    trial_number: int


@dataclass
class TrainingResult(TrialId):
    """One epoch's report; `time` (s) and `energy` (J) are cumulative over the trial."""

    time: float
    energy: float
    metric: float
    current_epoch: int


@dataclass
class ReportResponse:
    """The server's answer to a report."""

    stop_train: bool
    converged: bool
    message: str


def _job_wire_dict(job: JobSpec) -> dict[str, Any]:
    # JobSpecFromClient as JSON; the GPU fields are placeholders that the C++ client replaces with
    # the monitored GPUs' configuration before sending.
    data = job.dict()
    data.update(max_power=1.0, number_of_gpus=1, gpu_model="unset")
    if data.get("policy") is None:
        # Our extension: left out unless asked for, so that the request is the reference's.
        data.pop("policy", None)
    return data
