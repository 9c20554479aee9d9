"""The batch-size-optimizer job model (the reference's `zeus.optimizer.batch_size.common`).

`JobSpec` is what a training script gives `BatchSizeOptimizer`; the client adds the GPU
configuration (`GpuConfig`) from the monitored GPUs and the server answers the stored job
(`CreatedJob`, with `job_id` set). Fields and defaults are the reference's.

The reference's models are pydantic v1 models; ours are small dataclasses that behave like them
where a training script can tell: keyword-only construction, `parse_obj` / `parse_raw` /
`parse_file` / `construct` classmethods, `dict()` / `json()` / `copy()`, unknown keys ignored,
values coerced as pydantic v1 coerces them for these field types ("32" -> 32 and 1.5 -> 1 for an
int, 1 -> 1.0 and "0.5" -> 0.5 for a float, "yes"/"no"/0/1 for a bool, 3 -> "3" for a str, a
tuple for a list), attributes assignable without validation. What cannot be coerced raises
`ValidationError` (a ValueError, as pydantic's, and also a TypeError), listing every bad field.
Two differences, both stricter: `copy(update=...)` validates the merged values (pydantic trusts
them), and floats must be finite.
"""

from __future__ import annotations

import copy as _copy
import dataclasses
import inspect
import json as _json
import os
import pickle
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from zeus_cpp.utils._checks import check_float, check_int, check_str

__all__ = [
    "REGISTER_JOB_URL",
    "DELETE_JOB_URL",
    "GET_NEXT_BATCH_SIZE_URL",
    "REPORT_RESULT_URL",
    "REPORT_END_URL",
    "ValidationError",
    "JobParams",
    "JobSpec",
    "GpuConfig",
    "JobSpecFromClient",
    "CreatedJob",
    "TrialId",
    "TrainingResult",
    "ReportResponse",
]

# The server's routes, relative to the server URL (the client appends them to it).
REGISTER_JOB_URL = "/jobs"  # POST: register a job
DELETE_JOB_URL = "/jobs"  # DELETE ?job_id=: remove a job
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"  # GET ?job_id=: dispatch a trial
REPORT_RESULT_URL = "/report"  # POST: one epoch's result
REPORT_END_URL = "/trials"  # PATCH: end a trial


class ValidationError(ValueError, TypeError):
    """Values a model cannot take. `errors()` lists them as pydantic v1 does: dicts with `loc`
    (the field, then the index in a list), `msg` and `type`."""

    def __init__(self, model: str, errors: List[Dict[str, Any]]) -> None:
        self.model = model
        self._errors = errors
        lines = [f"  {_location(e['loc'])}: {e['msg']}" for e in errors]
        count = f"{len(errors)} validation error{'s' if len(errors) != 1 else ''}"
        super().__init__(f"{count} for {model}:\n" + "\n".join(lines))

    def errors(self) -> List[Dict[str, Any]]:
        return [dict(error) for error in self._errors]


def _location(loc: Tuple[Any, ...]) -> str:
    text = str(loc[0])
    for part in loc[1:]:
        text += f"[{part}]"
    return text


class _Invalid(Exception):
    """One value that cannot be coerced: its message and pydantic's error type."""

    def __init__(self, msg: str, kind: str, index: Optional[int] = None) -> None:
        super().__init__(msg)
        self.msg, self.kind, self.index = msg, kind, index


def _shown(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


# pydantic v1's spellings of a bool (after lowering a str).
_TRUE = {1, "1", "on", "t", "true", "y", "yes"}
_FALSE = {0, "0", "off", "f", "false", "n", "no"}


def _to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # Like int(): "32" and 1.5 (truncated) convert, "1.5", NaN and None do not; a bool is 0/1.
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _Invalid(f"value is not a valid integer, got {_shown(value)}", "type_error.integer") from None


def _to_float(value: Any) -> float:
    if isinstance(value, float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise _Invalid(f"value is not a valid float, got {_shown(value)}", "type_error.float") from None


def _to_bool(value: Any) -> bool:
    if value is True or value is False:
        return value
    key = value.decode() if isinstance(value, bytes) else value
    if isinstance(key, str):
        key = key.lower()
    try:
        if key in _TRUE:
            return True
        if key in _FALSE:
            return False
    except TypeError:  # unhashable
        pass
    raise _Invalid(f"value could not be parsed to a boolean, got {_shown(value)}", "type_error.bool")


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (int, float)):  # pydantic v1 writes numbers (bools included) out
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode()
    raise _Invalid(f"str type expected, got {_shown(value)}", "type_error.str")


def _list_of(item: Callable[[Any], Any]) -> Callable[[Any], list]:
    def convert(value: Any) -> list:
        if not isinstance(value, (list, tuple, set, frozenset)) and not inspect.isgenerator(value):
            raise _Invalid(f"value is not a valid list, got {_shown(value)}", "type_error.list")
        result = []
        for index, element in enumerate(value):
            try:
                result.append(item(element))
            except _Invalid as error:
                raise _Invalid(error.msg, error.kind, index) from None
        return result

    return convert


def _optional(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else inner(value)


_SCALARS: Dict[Any, Callable[[Any], Any]] = {int: _to_int, float: _to_float, bool: _to_bool, str: _to_str}


def _converter(hint: Any) -> Callable[[Any], Any]:
    """The coercion of a field type (the types these models use)."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        return _optional(_converter(next(a for a in args if a is not type(None))))
    if origin is list and len(args) == 1:
        return _list_of(_converter(args[0]))
    raise TypeError(f"no coercion for the field type {hint!r}")  # a programming error here


def _names(keys: Any, what: str) -> Optional[set]:
    if keys is None:
        return None
    if isinstance(keys, (set, frozenset, list, tuple, dict)):
        return set(keys)
    raise TypeError(f"{what} must be a set of field names, not {type(keys).__name__}")


class _Model:
    """What the models share: pydantic v1's methods (see the top of this file)."""

    __zeus_converters__: Dict[str, Callable[[Any], Any]] = {}

    def __post_init__(self) -> None:
        """Checks across fields, after each field was coerced (pydantic's validators)."""

    # ---- construction ----

    @classmethod
    def parse_obj(cls, obj: Any) -> Any:
        """The model of a mapping (or of what dict() accepts, a model included)."""
        if not isinstance(obj, dict):
            try:
                obj = dict(obj)
            except (TypeError, ValueError):
                message = f"{cls.__name__} expected dict not {type(obj).__name__}"
                raise ValidationError(cls.__name__, [{"loc": ("__root__",), "msg": message, "type": "type_error"}]) from None
        return cls(**{key: value for key, value in obj.items() if isinstance(key, str)})

    @classmethod
    def parse_raw(cls, b: Any, *, content_type: Optional[str] = None, encoding: str = "utf8",
                  proto: Optional[str] = None, allow_pickle: bool = False) -> Any:  # fmt: skip
        """The model of JSON text (str or bytes); pickle only with allow_pickle=True."""
        if proto is None and content_type is not None and content_type.endswith("pickle"):
            proto = "pickle"
        if proto not in (None, "json", "pickle"):
            raise TypeError(f"unknown protocol {proto!r}: 'json' or 'pickle'")
        if proto == "pickle":
            if not allow_pickle:
                raise TypeError("Trying to decode with pickle with allow_pickle=False")
            obj = pickle.loads(b if isinstance(b, bytes) else b.encode(encoding))
        else:
            try:
                obj = _json.loads(b.decode(encoding) if isinstance(b, (bytes, bytearray)) else b)
            except (ValueError, TypeError) as error:
                raise ValidationError(cls.__name__, [{"loc": ("__root__",), "msg": f"not JSON: {error}",
                                                      "type": "value_error.jsondecode"}]) from None  # fmt: skip
        return cls.parse_obj(obj)

    @classmethod
    def parse_file(cls, path: Any, *, content_type: Optional[str] = None, encoding: str = "utf8",
                   proto: Optional[str] = None, allow_pickle: bool = False) -> Any:  # fmt: skip
        """The model of a JSON file (a .pkl file is pickle, with allow_pickle=True)."""
        with open(os.fspath(path), "rb") as file:
            data = file.read()
        if proto is None and content_type is None and os.fspath(path).endswith(".pkl"):
            proto = "pickle"
        return cls.parse_raw(data, content_type=content_type, encoding=encoding, proto=proto,
                             allow_pickle=allow_pickle)  # fmt: skip

    @classmethod
    def construct(cls, _fields_set: Optional[set] = None, **values: Any) -> Any:
        """A model of trusted values: no coercion, no validation (missing fields: defaults)."""
        model = cls.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.name in values:
                object.__setattr__(model, f.name, values[f.name])
            elif f.default is not dataclasses.MISSING:
                object.__setattr__(model, f.name, f.default)
        object.__setattr__(model, "__fields_set__", set(values) if _fields_set is None else set(_fields_set))
        return model

    # ---- export ----

    def dict(self, *, include: Any = None, exclude: Any = None, by_alias: bool = False,
             skip_defaults: Optional[bool] = None, exclude_unset: bool = False,
             exclude_defaults: bool = False, exclude_none: bool = False) -> Dict[str, Any]:  # fmt: skip
        """The fields as a dict in declaration order (lists copied). include/exclude: sets of
        field names; exclude_unset: only the fields given at construction; exclude_defaults:
        those that differ from their default; exclude_none: those that are not None."""
        del by_alias  # no field has an alias
        exclude_unset = exclude_unset or bool(skip_defaults)
        kept, dropped = _names(include, "include"), _names(exclude, "exclude") or set()
        given = getattr(self, "__fields_set__", set())
        result: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if (kept is not None and f.name not in kept) or f.name in dropped:
                continue
            if exclude_unset and f.name not in given:
                continue
            if not hasattr(self, f.name):  # construct() without a required field
                continue
            value = getattr(self, f.name)
            if exclude_defaults and f.default is not dataclasses.MISSING and value == f.default:
                continue
            if exclude_none and value is None:
                continue
            result[f.name] = list(value) if isinstance(value, list) else value
        return result

    def json(self, *, include: Any = None, exclude: Any = None, by_alias: bool = False,
             skip_defaults: Optional[bool] = None, exclude_unset: bool = False,
             exclude_defaults: bool = False, exclude_none: bool = False,
             encoder: Optional[Callable[[Any], Any]] = None, models_as_dict: bool = True,
             **dumps_kwargs: Any) -> str:  # fmt: skip
        """json.dumps of dict() (the same options), as pydantic v1 writes a request body."""
        del models_as_dict  # no field holds a model
        data = self.dict(include=include, exclude=exclude, by_alias=by_alias, skip_defaults=skip_defaults,
                         exclude_unset=exclude_unset, exclude_defaults=exclude_defaults,
                         exclude_none=exclude_none)  # fmt: skip
        return _json.dumps(data, default=encoder, **dumps_kwargs)

    def copy(self, *, include: Any = None, exclude: Any = None, update: Optional[Dict[str, Any]] = None,
             deep: bool = False) -> Any:  # fmt: skip
        """A copy, with `update`'s values changed. Unlike pydantic, the result is validated
        (so a bad update raises ValidationError here rather than at the server)."""
        values = self.dict(include=include, exclude=exclude)
        if deep:
            values = _copy.deepcopy(values)
        values.update(update or {})
        model = type(self)(**values)
        given = set(getattr(self, "__fields_set__", set())) | set(update or {})
        object.__setattr__(model, "__fields_set__", given & set(values))
        return model

    # ---- pydantic v1's dunder behaviour ----

    def __iter__(self) -> Iterable[Tuple[str, Any]]:
        for f in dataclasses.fields(self):
            if hasattr(self, f.name):  # construct() may leave a required field out
                yield f.name, getattr(self, f.name)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, _Model):
            return self.dict() == other.dict()
        return self.dict() == other

    def __str__(self) -> str:
        return " ".join(f"{name}={value!r}" for name, value in self)


def _model(cls: type) -> type:
    """Makes `cls` (a _Model subclass) a dataclass whose constructor takes every field by
    keyword, coerces each value to its field's type, ignores unknown keys and runs the checks
    across fields (defaults are allowed before required fields; Python 3.9 has no kw_only)."""
    cls = dataclass(init=False, eq=False)(cls)
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    hints = typing.get_type_hints(cls)
    converters = {f.name: _converter(hints[f.name]) for f in fields}

    def __init__(self, **data: Any) -> None:
        errors: List[Dict[str, Any]] = []
        values: Dict[str, Any] = {}
        for f in fields:
            if f.name in data:
                try:
                    values[f.name] = converters[f.name](data[f.name])
                except _Invalid as error:
                    loc = (f.name,) if error.index is None else (f.name, error.index)
                    errors.append({"loc": loc, "msg": error.msg, "type": error.kind})
            elif f.default is not dataclasses.MISSING:
                values[f.name] = f.default
            else:
                errors.append({"loc": (f.name,), "msg": "field required", "type": "value_error.missing"})
        if errors:
            raise ValidationError(cls.__name__, errors)
        for name, value in values.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "__fields_set__", names & set(data))
        try:
            self.__post_init__()
        except ValidationError:
            raise
        except (TypeError, ValueError) as error:
            root = {"loc": ("__root__",), "msg": str(error), "type": "value_error"}
            raise ValidationError(cls.__name__, [root]) from None

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
    cls.__zeus_converters__ = converters
    return cls


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


@_model
class JobParams(_Model):
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


@_model
class JobSpec(JobParams):
    """The job a training script registers (`job_id` optional)."""


@_model
class GpuConfig(_Model):
    """The GPUs of the job: `max_power` (W) = the maximum power limit times `number_of_gpus`."""

    max_power: float
    number_of_gpus: int
    gpu_model: str

    def __post_init__(self) -> None:
        self.max_power = check_float("max_power", self.max_power, positive=True)
        self.number_of_gpus = check_int("number_of_gpus", self.number_of_gpus, minimum=1)
        check_str("gpu_model", self.gpu_model, non_empty=True)


@_model
class JobSpecFromClient(JobSpec, GpuConfig):
    """What the client sends to POST /jobs: the spec plus the GPU configuration."""

    def __post_init__(self) -> None:
        JobSpec.__post_init__(self)
        GpuConfig.__post_init__(self)


@_model
class CreatedJob(JobSpecFromClient):
    """The job as the server stored it (`job_id` set)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.job_id is None:
            raise ValueError("job_id must be set in a created job")

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "CreatedJob":
        """The job of the server's answer (unknown keys ignored): parse_obj."""
        return cls.parse_obj(data)


@_model
class TrialId(_Model):
    """One trial of a job: the batch size it runs with and its number (from 1)."""

    job_id: str
    batch_size: int
    trial_number: int


@_model
class TrainingResult(TrialId):
    """One epoch's report; `time` (s) and `energy` (J) are cumulative over the trial."""

    time: float
    energy: float
    metric: float
    current_epoch: int


@_model
class ReportResponse(_Model):
    """The server's answer to a report."""

    stop_train: bool
    converged: bool
    message: str


def _job_wire_dict(job: JobSpec) -> Dict[str, Any]:
    # JobSpecFromClient as JSON; the GPU fields are placeholders that the C++ client replaces with
    # the monitored GPUs' configuration before sending.
    data = job.dict()
    data.update(max_power=1.0, number_of_gpus=1, gpu_model="unset")
    if data.get("policy") is None:
        # Our extension: left out unless asked for, so that the request is the reference's.
        data.pop("policy", None)
    return data
