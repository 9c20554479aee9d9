"""zeus_cpp.optimizer.batch_size.common behaves like the reference's pydantic-v1 models: the
route constants, parse_obj/parse_raw/parse_file/construct, dict/json/copy, unknown keys ignored
and pydantic v1's coercions. Pure Python: no server, no GPU."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from zeus_cpp.optimizer.batch_size import common
from zeus_cpp.optimizer.batch_size.common import (
    CreatedJob,
    GpuConfig,
    JobSpec,
    JobSpecFromClient,
    ReportResponse,
    TrainingResult,
    TrialId,
    ValidationError,
)

SPEC = {"job_id_prefix": "mnist", "batch_sizes": [128, 32, 64], "default_batch_size": 64}


def test_the_route_constants():
    assert common.REGISTER_JOB_URL == "/jobs"
    assert common.DELETE_JOB_URL == "/jobs"
    assert common.GET_NEXT_BATCH_SIZE_URL == "/jobs/batch_size"
    assert common.REPORT_RESULT_URL == "/report"
    assert common.REPORT_END_URL == "/trials"
    for name in ("REGISTER_JOB_URL", "DELETE_JOB_URL", "GET_NEXT_BATCH_SIZE_URL", "REPORT_RESULT_URL", "REPORT_END_URL"):
        assert name in common.__all__


def test_parse_obj_ignores_unknown_keys_and_coerces():
    spec = JobSpec.parse_obj({**SPEC, "batch_sizes": ["128", 32, 64.0], "default_batch_size": "64",
                              "eta_knob": 1, "beta_knob": "3", "higher_is_better_metric": "no",
                              "max_epochs": 7.9, "mab_seed": "5", "something_new": [1, 2]})  # fmt: skip
    assert spec.batch_sizes == [32, 64, 128] and all(type(size) is int for size in spec.batch_sizes)
    assert spec.default_batch_size == 64 and type(spec.default_batch_size) is int
    assert spec.eta_knob == 1.0 and type(spec.eta_knob) is float
    assert spec.beta_knob == 3.0 and spec.higher_is_better_metric is False
    assert spec.max_epochs == 7  # truncated, as pydantic v1 does
    assert spec.mab_seed == 5
    assert not hasattr(spec, "something_new")
    # The constructor behaves the same (pydantic v1 ignores extra keywords too).
    assert JobSpec(**SPEC, unknown=1) == JobSpec(**SPEC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), ("yes", True), ("On", True), (1, True), ("t", True), (b"true", True),
     (False, False), ("no", False), ("0", False), (0, False), ("off", False)],
)  # fmt: skip
def test_bool_spellings(value, expected):
    assert ReportResponse(stop_train=value, converged=False, message="m").stop_train is expected


def test_str_fields_take_numbers_and_bytes():
    trial = TrialId.parse_obj({"job_id": b"j-1", "batch_size": "8", "trial_number": 2.0})
    assert (trial.job_id, trial.batch_size, trial.trial_number) == ("j-1", 8, 2)
    assert ReportResponse(stop_train=1, converged=0, message=5).message == "5"


@pytest.mark.parametrize(
    ("data", "location", "kind"),
    [
        ({**SPEC, "batch_sizes": [32, "sixty-four"]}, ("batch_sizes", 1), "type_error.integer"),
        ({**SPEC, "batch_sizes": "32,64"}, ("batch_sizes",), "type_error.list"),
        ({**SPEC, "batch_sizes": 64}, ("batch_sizes",), "type_error.list"),
        ({**SPEC, "default_batch_size": "1.5"}, ("default_batch_size",), "type_error.integer"),
        ({**SPEC, "eta_knob": "half"}, ("eta_knob",), "type_error.float"),
        ({**SPEC, "higher_is_better_metric": 2}, ("higher_is_better_metric",), "type_error.bool"),
        ({**SPEC, "job_id": ["mnist-1"]}, ("job_id",), "type_error.str"),
        ({"batch_sizes": [8], "default_batch_size": 8}, ("job_id_prefix",), "value_error.missing"),
    ],
)
def test_what_cannot_be_coerced_is_a_validation_error(data, location, kind):
    with pytest.raises(ValidationError) as caught:
        JobSpec.parse_obj(data)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
    assert [(e["loc"], e["type"]) for e in caught.value.errors()] == [(location, kind)]
    assert "JobSpec" in str(caught.value) and location[0] in str(caught.value)


def test_every_bad_field_is_listed():
    with pytest.raises(ValidationError) as caught:
        JobSpec.parse_obj({"batch_sizes": ["x"], "default_batch_size": None, "eta_knob": {}})
    assert [e["loc"] for e in caught.value.errors()] == [
        ("job_id_prefix",), ("batch_sizes", 0), ("default_batch_size",), ("eta_knob",)]  # fmt: skip
    assert str(caught.value).startswith("4 validation errors for JobSpec")


def test_checks_across_fields_still_apply_after_coercion():
    with pytest.raises(ValidationError, match="default_batch_size"):
        JobSpec.parse_obj({**SPEC, "default_batch_size": "48"})
    with pytest.raises(ValidationError, match="eta_knob"):
        JobSpec.parse_obj({**SPEC, "eta_knob": "1.5"})
    with pytest.raises(ValidationError, match="job_id"):
        JobSpec.parse_obj({**SPEC, "job_id": "other-1"})
    with pytest.raises(ValueError, match="job_id"):
        CreatedJob.parse_obj({**SPEC, "max_power": 300, "number_of_gpus": 1, "gpu_model": "V100"})


def test_parse_obj_needs_a_mapping():
    with pytest.raises(ValidationError, match="expected dict"):
        JobSpec.parse_obj("mnist")
    assert JobSpec.parse_obj(list(SPEC.items())) == JobSpec(**SPEC)
    assert JobSpec.parse_obj(JobSpec(**SPEC)) == JobSpec(**SPEC)  # a model is a mapping of its fields


def test_parse_raw_and_parse_file(tmp_path):
    text = json.dumps({**SPEC, "extra": True})
    assert JobSpec.parse_raw(text) == JobSpec(**SPEC)
    assert JobSpec.parse_raw(text.encode()) == JobSpec(**SPEC)
    with pytest.raises(ValidationError, match="not JSON"):
        JobSpec.parse_raw("{job_id_prefix")
    with pytest.raises(TypeError, match="allow_pickle"):
        JobSpec.parse_raw(pickle.dumps(SPEC), proto="pickle")
    assert JobSpec.parse_raw(pickle.dumps(SPEC), proto="pickle", allow_pickle=True) == JobSpec(**SPEC)
    path = tmp_path / "job.json"
    path.write_text(text)
    assert JobSpec.parse_file(path) == JobSpec(**SPEC)


def test_dict_and_json_in_field_order():
    spec = JobSpec(**SPEC)
    data = spec.dict()
    assert list(data) == ["job_id", "job_id_prefix", "batch_sizes", "default_batch_size", "eta_knob", "beta_knob",
                          "target_metric", "higher_is_better_metric", "max_epochs", "num_pruning_rounds",
                          "window_size", "mab_prior_mean", "mab_prior_precision", "mab_num_explorations",
                          "mab_seed", "policy"]  # fmt: skip
    data["batch_sizes"].append(1)  # a copy
    assert spec.batch_sizes == [32, 64, 128]
    assert spec.json() == json.dumps(spec.dict())  # pydantic v1's separators: ", " and ": "
    assert json.loads(spec.json(exclude={"policy"})) == {k: v for k, v in spec.dict().items() if k != "policy"}
    assert spec.dict(include={"job_id_prefix", "eta_knob"}) == {"job_id_prefix": "mnist", "eta_knob": 0.5}
    assert spec.dict(exclude_unset=True) == {"job_id_prefix": "mnist", "batch_sizes": [32, 64, 128],
                                             "default_batch_size": 64}  # fmt: skip
    assert spec.dict(exclude_defaults=True) == spec.dict(exclude_unset=True)
    assert "job_id" not in spec.dict(exclude_none=True)
    assert spec.json(indent=2).startswith("{\n  ")
    # GpuConfig's fields come first in the client's request, as pydantic v1 orders them.
    both = JobSpecFromClient(**SPEC, max_power=300, number_of_gpus=1, gpu_model="V100")
    assert list(both.dict())[:4] == ["max_power", "number_of_gpus", "gpu_model", "job_id"]


def test_copy_with_update():
    spec = JobSpec(**SPEC)
    other = spec.copy(update={"max_epochs": "9", "beta_knob": None})
    assert (other.max_epochs, other.beta_knob) == (9, None) and spec.max_epochs == 100
    assert other.batch_sizes is not spec.batch_sizes
    assert spec.copy() == spec and spec.copy(deep=True) == spec
    assert "max_epochs" in other.dict(exclude_unset=True)
    with pytest.raises(ValidationError, match="default_batch_size"):
        spec.copy(update={"default_batch_size": 7})  # validated (pydantic would not check)


def test_assignment_is_not_validated_as_in_pydantic_v1():
    spec = JobSpec(**SPEC)
    spec.beta_knob = None  # the reference's tests disable early stopping like this
    assert spec.beta_knob is None


def test_equality_string_construct_and_pickle():
    spec = JobSpec(**SPEC)
    assert spec == JobSpec(**SPEC) and spec == spec.dict() and spec != JobSpec(**{**SPEC, "eta_knob": 0.7})
    assert str(spec).startswith("job_id=None job_id_prefix='mnist' batch_sizes=[32, 64, 128]")
    assert repr(spec).startswith("JobSpec(job_id=None, job_id_prefix='mnist'")
    trusted = TrainingResult.construct(job_id="j", batch_size=8, trial_number=1, time=1, energy=2, metric=0.5,
                                       current_epoch=1)  # fmt: skip
    assert trusted.time == 1 and type(trusted.time) is int  # construct() does not coerce
    assert pickle.loads(pickle.dumps(spec)) == spec and copy.deepcopy(spec) == spec
    assert dict(TrialId(job_id="j", batch_size=8, trial_number=1)) == {"job_id": "j", "batch_size": 8, "trial_number": 1}


def test_models_take_keywords_only():
    with pytest.raises(TypeError):
        TrialId("j", 8, 1)  # type: ignore[misc]
    assert GpuConfig(max_power="300", number_of_gpus="2", gpu_model="V100").max_power == 300.0
