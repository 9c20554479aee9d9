"""The batch-size-optimizer client (the reference's `zeus.optimizer.batch_size.client`).

    bso = BatchSizeOptimizer(monitor, "http://bso:8000", JobSpec(job_id_prefix="mnist",
                             batch_sizes=[32, 64, 128], default_batch_size=64))
    batch_size = bso.get_batch_size()
    bso.on_train_begin()
    for epoch in range(max_epochs):
        train_one_epoch(batch_size)
        bso.on_evaluate(validate())    # raises ZeusBSOTrainFailError when the trial fails
        if bso.training_finished:
            break

The HTTP client, the retries and the measurement bookkeeping run in C++
(zeus::bso::BatchSizeOptimizer); the server is `zeus bso serve` (or the reference's server).

Under torch.distributed (a process group is initialised), every rank creates the client and calls
`get_batch_size()`, `on_train_begin()` and `on_evaluate(metric)` at the same points: rank 0 asks
the server and broadcasts the batch size (and the trial) to the others; rank 0 reports its
monitor's measurement and the metric it was given, and broadcasts the server's decision, so that
every rank stops (or raises ZeusBSOTrainFailError) together. Rank 0's monitor should therefore
measure every GPU of the job (the job's `number_of_gpus` is its monitor's GPU count).

Without torch.distributed, the reference's way of handing rank 0's trial to another rank's client
works too: assign `other.current_batch_size = bs` and `other.trial_number = rank0.trial_number`
(both, in either order; the trial is set once both are known, and checked against the job).

`on_train_begin()` may come before `get_batch_size()`, as the reference allows: measuring then
starts as soon as the trial is known (the batch-size request itself is not measured).
"""

from __future__ import annotations

import atexit
import json
import warnings
import weakref

from zeus_cpp import _zeus
from zeus_cpp.callback import Callback
from zeus_cpp.optimizer.batch_size.common import (
    CreatedJob,
    JobSpec,
    JobSpecFromClient,
    ReportResponse,
    _job_wire_dict,
)
from zeus_cpp.optimizer.batch_size.exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)
from zeus_cpp.utils._checks import check_float, check_int, check_str
from zeus_cpp.utils.framework import broadcast_ints, get_rank, get_world_size, is_distributed

__all__ = ["BatchSizeOptimizer"]

# Codes rank 0 broadcasts after a report: [status, stop_train, converged].
_OK, _FAILED = 0, 1


def _close_at_exit(reference: "weakref.ref[BatchSizeOptimizer]") -> None:
    client = reference()
    if client is not None:
        try:
            client.close()
        except Exception as error:  # the server may be gone at exit
            warnings.warn(f"BatchSizeOptimizer: could not end the trial at exit: {error}")


class BatchSizeOptimizer(Callback):
    """One training run's batch-size optimizer.

    Args:
        monitor: The `ZeusMonitor` measuring the job's GPUs.
        server_url: The BSO server, e.g. "http://127.0.0.1:8000".
        job: The job's `JobSpec`.
        rank: This process's rank; only rank 0 talks to the server for the batch size. Under
            torch.distributed the process group's rank is used.
    """

    def __init__(self, monitor, server_url: str, job: JobSpec, rank: int = 0) -> None:
        _zeus._check_window_monitor(monitor, "monitor")
        check_str("server_url", server_url, non_empty=True)
        if not isinstance(job, JobSpec):
            raise TypeError(f"job must be a JobSpec, not {type(job).__name__}")
        rank = check_int("rank", rank, minimum=0)
        self.distributed = is_distributed() and get_world_size() > 1
        if self.distributed:
            group_rank = get_rank()
            if rank not in (0, group_rank):
                warnings.warn(
                    f"rank={rank} differs from the torch.distributed rank {group_rank}; using {group_rank}",
                    stacklevel=2,
                )
            rank = group_rank
        self.monitor = monitor
        self.server_url = server_url
        self.rank = rank
        self._impl = _zeus._BatchSizeOptimizer(
            monitor, server_url, json.dumps(_job_wire_dict(job)), rank=rank
        )
        self.job = CreatedJob.from_dict(json.loads(self._impl.job_json))
        # What was sent to POST /jobs, as the reference keeps it: the spec as given (job_id as the
        # user set it, None when the server made one) and the monitored GPUs' configuration.
        self.job_spec = JobSpecFromClient.parse_obj(
            {**job.dict(), **{k: getattr(self.job, k) for k in ("max_power", "number_of_gpus", "gpu_model")}}
        )
        self._last_response: ReportResponse | None = None
        # on_train_begin() came before the trial was known: measuring starts once it is.
        self._begin_pending = False
        # Values assigned to current_batch_size / trial_number before both were known (0: none).
        self._handed_batch_size = 0
        self._handed_trial_number = 0
        atexit.register(_close_at_exit, weakref.ref(self))

    # ---- the reference's attributes ----

    @property
    def current_batch_size(self) -> int:
        """The trial's batch size (0 before get_batch_size). Assignable, to hand rank 0's trial
        to another rank's client (with `trial_number`): one of the job's batch sizes."""
        trial = self._impl.trial
        return self._handed_batch_size if trial is None else trial[1]

    @current_batch_size.setter
    def current_batch_size(self, value: int) -> None:
        value = check_int("current_batch_size", value, minimum=0)
        if value != 0 and value not in self.job.batch_sizes:
            raise ValueError(f"current_batch_size {value} is not one of the job's batch sizes {self.job.batch_sizes}")
        self._hand_trial("current_batch_size", value)

    @property
    def trial_number(self) -> int:
        """The trial's number (0 before get_batch_size). Assignable, to hand rank 0's trial to
        another rank's client (with `current_batch_size`): 1 or more."""
        trial = self._impl.trial
        return self._handed_trial_number if trial is None else trial[2]

    @trial_number.setter
    def trial_number(self, value: int) -> None:
        self._hand_trial("trial_number", check_int("trial_number", value, minimum=0))

    def _hand_trial(self, name: str, value: int) -> None:
        trial = self._impl.trial
        if trial is not None:
            if value == getattr(self, name):
                return
            raise ZeusBSOBadOperationError(
                f"cannot set {name} to {value}: this client already runs trial {trial[2]} with batch size "
                f"{trial[1]} (one trial per client; create another BatchSizeOptimizer for another)"
            )
        if name == "current_batch_size":
            self._handed_batch_size = value
        else:
            self._handed_trial_number = value
        if self._handed_batch_size and self._handed_trial_number:
            # Both known: the C++ client takes the trial (checked against the job) and reports it.
            self._impl.set_trial(self.job.job_id, self._handed_batch_size, self._handed_trial_number)
            self._handed_batch_size = self._handed_trial_number = 0
            self._start_pending_measurement()

    def _start_pending_measurement(self) -> None:
        if self._begin_pending and self._impl.trial is not None:
            self._begin_pending = False
            self._impl.on_train_begin()

    def _no_trial_error(self, call: str) -> ZeusBSOOperationOrderError:
        if self._handed_batch_size or self._handed_trial_number:
            missing = "trial_number" if self._handed_batch_size else "current_batch_size"
            return ZeusBSOOperationOrderError(
                f"{call}: only half of the trial was handed to this client: set {missing} as well"
            )
        return ZeusBSOOperationOrderError(f"call get_batch_size() before {call}")

    @property
    def cur_epoch(self) -> int:
        """Epochs reported so far."""
        return self._impl.current_epoch

    @property
    def running_time(self) -> float:
        """Seconds measured over the reported epochs."""
        return self._impl.time

    @property
    def consumed_energy(self) -> float:
        """GPU joules measured over the reported epochs."""
        return self._impl.energy

    @property
    def training_finished(self) -> bool:
        """The server said to stop (converged, or the trial failed)."""
        if self.distributed and self.rank != 0:
            return self._last_response is not None and self._last_response.stop_train
        return self._impl.training_finished

    # ---- lifecycle ----

    def get_batch_size(self) -> int:
        """The batch size to train with (the first call starts a trial on the server).

        Rank 0 only, unless torch.distributed is initialised: then every rank calls it and gets
        rank 0's batch size.
        """
        if not self.distributed:
            if self.rank != 0:
                raise ZeusBSOBadOperationError(
                    f"only rank 0 may ask the server for the batch size (this is rank {self.rank})"
                )
            if self._impl.trial is None and (self._handed_batch_size or self._handed_trial_number):
                raise self._no_trial_error("get_batch_size()")
            batch_size = self._impl.get_batch_size()
            self._start_pending_measurement()
            return batch_size
        if self.rank == 0:
            try:
                batch_size = self._impl.get_batch_size()
            except BaseException:
                broadcast_ints([-1, -1])
                raise
            broadcast_ints([batch_size, self.trial_number])
            self._start_pending_measurement()
            return batch_size
        batch_size, trial_number = broadcast_ints([0, 0])
        if batch_size < 0:
            raise ZeusBSORuntimError("rank 0 could not get a batch size from the BSO server")
        if self._impl.trial is None:
            self._impl.set_trial(self.job.job_id, batch_size, trial_number)
        return batch_size

    def on_train_begin(self) -> None:
        """Starts measuring. Before get_batch_size() (as the reference allows), measuring starts
        once the trial is known."""
        if self.distributed and self.rank != 0:
            return  # rank 0 measures and reports
        if self._impl.trial is None:
            self._begin_pending = True
            return
        self._impl.on_train_begin()

    def on_evaluate(self, metric: float) -> None:
        """After each epoch's validation: reports the epoch to the server.

        Raises:
            ZeusBSOTrainFailError: the server stopped the trial without convergence (relaunch
                the job; the server will try another batch size).
            ZeusBSOOperationOrderError: get_batch_size() was not called.
        """
        metric = check_float("metric", metric)
        if self._impl.trial is None:
            raise self._no_trial_error("on_evaluate()")
        if not self.distributed:
            self._last_response = ReportResponse(**self._impl.on_evaluate(metric))
            return
        if self.rank == 0:
            try:
                response = ReportResponse(**self._impl.on_evaluate(metric))
            except ZeusBSOTrainFailError:
                response = ReportResponse(**self._stopped_response())
                broadcast_ints([_OK, 1, 0])
                self._last_response = response
                raise
            except BaseException:
                broadcast_ints([_FAILED, 0, 0])
                raise
            broadcast_ints([_OK, int(response.stop_train), int(response.converged)])
            self._last_response = response
            return
        if self._last_response is not None and self._last_response.stop_train:
            return
        status, stop_train, converged = broadcast_ints([0, 0, 0])
        if status != _OK:
            raise ZeusBSORuntimError("rank 0 could not report the epoch to the BSO server")
        self._last_response = ReportResponse(
            stop_train=bool(stop_train), converged=bool(converged), message="decided by rank 0"
        )
        if stop_train and not converged:
            raise ZeusBSOTrainFailError(
                "Train failed (rank 0's report): this batch size will not be selected again. "
                "Please re-launch the training"
            )

    def _stopped_response(self) -> dict:
        return {"stop_train": True, "converged": False, "message": "train failed"}

    def close(self) -> None:
        """Ends the trial on the server (an unfinished trial becomes failed); idempotent. Also
        done when the client is garbage collected."""
        self._impl.end()

    def __repr__(self) -> str:
        return (
            f"BatchSizeOptimizer(server_url={self.server_url!r}, job_id={self.job.job_id!r}, "
            f"batch_size={self.current_batch_size}, epoch={self.cur_epoch})"
        )
