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

Interruption and resumption (ours; the reference marks such a trial failed without a word): a
trial the server has not decided when the client closes (Ctrl-C, an exception, a loop that ended
early) stays open on the server and is recorded on this machine (`_trial_state`), with a warning
saying so; the job's next run on this machine resumes it: `get_batch_size()` returns its batch
size without a new trial and the reports carry the earlier run's epochs, time and energy. Without
a `job_id` (every run a new job) or with `resume=False`, the trial is marked failed instead (left
out of the job's statistics), with a warning. See docs/python-optimizers.md.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import warnings
import weakref
from pathlib import Path

from zeus_cpp import _zeus
from zeus_cpp.callback import Callback
from zeus_cpp.optimizer.batch_size.common import (
    CreatedJob,
    JobSpec,
    JobSpecFromClient,
    ReportResponse,
    _job_wire_dict,
)
from zeus_cpp.optimizer.batch_size._trial_state import SavedTrial, default_state_dir, job_directory, saved_trials
from zeus_cpp.optimizer.batch_size.exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
    ZeusBSOTrialWarning,
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
            client._close(at_exit=True)
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
        resume: (keyword only, ours) True: a trial of this job that an earlier run on this
            machine left undecided is continued, and one this run leaves undecided is kept for
            the next run. False: such trials are marked failed on the server (this run starts
            training from scratch).
        state_dir: (keyword only, ours) Where undecided trials are recorded; default
            $ZEUS_BSO_STATE_DIR, else $XDG_STATE_HOME/zeus_cpp/bso, else
            ~/.local/state/zeus_cpp/bso.
    """

    def __init__(
        self,
        monitor,
        server_url: str,
        job: JobSpec,
        rank: int = 0,
        *,
        resume: bool = True,
        state_dir: str | os.PathLike | None = None,
    ) -> None:
        _zeus._check_window_monitor(monitor, "monitor")
        check_str("server_url", server_url, non_empty=True)
        if not isinstance(job, JobSpec):
            raise TypeError(f"job must be a JobSpec, not {type(job).__name__}")
        rank = check_int("rank", rank, minimum=0)
        if not isinstance(resume, bool):
            raise TypeError(f"resume must be a bool, not {type(resume).__name__}")
        if state_dir is not None and not isinstance(state_dir, (str, os.PathLike)):
            raise TypeError(f"state_dir must be a path, not {type(state_dir).__name__}")
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
        # Interruption and resumption (rank 0 only): the trial's record on this machine, whether
        # this process dispatched (or resumed) the trial, and why an undecided one cannot be kept.
        self.resume = resume
        self._saved: SavedTrial | None = None
        self._dispatched_here = False
        self._resumed_from: Path | None = None
        self._state_directory: Path | None = None
        self._not_kept = ""
        if rank == 0:
            self._prepare_resumption(state_dir)
        atexit.register(_close_at_exit, weakref.ref(self))

    # ---- interruption and resumption ----

    def _prepare_resumption(self, state_dir) -> None:
        """Takes the oldest undecided trial an earlier run of this job left (resume=True), or marks
        every such trial failed (resume=False)."""
        if self.job_spec.job_id is None:
            self._not_kept = (
                "the JobSpec has no job_id, so every run registers a new job and none could resume it; "
                "give the JobSpec a job_id to resume interrupted trials"
            )
            return
        self._state_directory = job_directory(
            Path(state_dir) if state_dir is not None else default_state_dir(), self._impl.server_url, self.job.job_id
        )
        self._not_kept = "" if self.resume else "resume=False"
        for saved, problem in saved_trials(
            self._state_directory, self._impl.server_url, self.job.job_id, self.job.batch_sizes
        ):
            if problem:
                warnings.warn(
                    f"BatchSizeOptimizer: ignoring the trial record {problem}; delete it if it is not needed",
                    ZeusBSOTrialWarning,
                    stacklevel=3,
                )
                continue
            record = saved.record
            trial = (self.job.job_id, record["batch_size"], record["trial_number"])
            if self.resume and self._saved is None:
                self._impl.resume(*trial, record["epochs"], float(record["time"]), float(record["energy"]))
                self._saved, self._dispatched_here, self._resumed_from = saved, True, saved.path
                saved.write({**record, "state": "running", "pid": os.getpid()})
                warnings.warn(
                    f"BatchSizeOptimizer: resuming trial {trial[2]} (batch size {trial[1]}) of job {trial[0]}, "
                    f"which an earlier run left undecided after {record['epochs']} epoch(s), "
                    f"{record['time']:.1f} s and {record['energy']:.1f} J (recorded in {saved.path}). This run's "
                    f"reports add its epochs, time and energy to those, so resume training from your checkpoint "
                    f"of epoch {record['epochs']}; if this run trains from scratch instead, pass resume=False.",
                    ZeusBSOTrialWarning,
                    stacklevel=3,
                )
                continue
            if self.resume:
                saved.release()  # another undecided trial: for another run
                continue
            try:
                self._impl.abandon_trial(*trial)
            except ZeusBSORuntimError as error:
                saved.release()
                warnings.warn(
                    f"BatchSizeOptimizer: could not mark trial {trial[2]} of job {trial[0]} failed ({error}); "
                    f"its record {saved.path} is kept",
                    ZeusBSOTrialWarning,
                    stacklevel=3,
                )
                continue
            saved.remove()
            warnings.warn(
                f"BatchSizeOptimizer: resume=False: trial {trial[2]} (batch size {trial[1]}) of job {trial[0]}, "
                f"left undecided by an earlier run after {record['epochs']} epoch(s), is marked failed on the "
                f"server (left out of the job's statistics) and its record {saved.path} removed",
                ZeusBSOTrialWarning,
                stacklevel=3,
            )

    def _record(self, **extra) -> dict:
        _, batch_size, trial_number = self._impl.trial
        return {
            "server_url": self._impl.server_url,
            "job_id": self.job.job_id,
            "batch_size": batch_size,
            "trial_number": trial_number,
            "epochs": self._impl.current_epoch,
            "time": self._impl.time,
            "energy": self._impl.energy,
            "state": "running",
            "pid": os.getpid(),
            **extra,
        }

    def _after_dispatch(self) -> None:
        """A trial was just dispatched to this process: record it when it could be resumed."""
        self._dispatched_here = True
        if self._saved is not None or self._not_kept or self._state_directory is None:
            return
        try:
            self._saved = SavedTrial.create(self._state_directory, self._record())
        except OSError as error:
            self._not_kept = f"its record could not be written in {self._state_directory} ({error})"
            warnings.warn(
                f"BatchSizeOptimizer: {self._not_kept}: if this run is interrupted, its trial will be marked "
                f"failed instead of being resumed",
                ZeusBSOTrialWarning,
                stacklevel=3,
            )

    def _after_report(self) -> None:
        """Keeps the record in step with the reports: removed once the server decided."""
        if self._saved is None:
            return
        try:
            if self._impl.training_finished:
                self._saved.remove()
                self._saved = None
            else:
                self._saved.write(self._record())
        except OSError as error:
            warnings.warn(f"BatchSizeOptimizer: updating {self._saved.path}: {error}", ZeusBSOTrialWarning, stacklevel=3)

    def _report(self, metric: float) -> ReportResponse:
        try:
            return ReportResponse(**self._impl.on_evaluate(metric))
        except ZeusBSORuntimError as error:
            resumed, self._resumed_from = self._resumed_from, None
            if resumed is None or " 400" not in str(error) and "400 " not in str(error):
                raise
            # The server no longer takes the trial an earlier run left (marked failed meanwhile).
            if self._saved is not None:
                self._saved.remove()
                self._saved = None
            self._dispatched_here = False
            raise ZeusBSORuntimError(
                f"{error} (this run resumed that trial from {resumed}, which is now removed: the server no longer "
                f"accepts reports for it; relaunch the job to get a new trial)"
            ) from error
        finally:
            self._after_report()

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
            self._after_dispatch()
            self._start_pending_measurement()
            return batch_size
        if self.rank == 0:
            try:
                batch_size = self._impl.get_batch_size()
            except BaseException:
                broadcast_ints([-1, -1])
                raise
            self._after_dispatch()
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
            self._last_response = self._report(metric)
            return
        if self.rank == 0:
            try:
                response = self._report(metric)
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
        """Ends this run's part of the trial; idempotent; also done at exit. A trial the server
        has not decided is kept open for the job's next run on this machine (or, when it cannot
        be resumed, marked failed), with a warning saying which and why."""
        self._close(at_exit=False)

    def _close(self, at_exit: bool) -> None:
        trial = self._impl.trial
        undecided = trial is not None and self._dispatched_here and not self._impl.training_finished
        self._dispatched_here = False
        if not undecided:
            if self._saved is not None:
                self._saved.remove()
                self._saved = None
            self._impl.end()
            return
        why = _why_closed(at_exit)
        _, batch_size, trial_number = trial
        what = (
            f"BatchSizeOptimizer: trial {trial_number} (batch size {batch_size}) of job {self.job.job_id} ended "
            f"before the server decided ({why}), after {self._impl.current_epoch} reported epoch(s), "
            f"{self._impl.time:.1f} s and {self._impl.energy:.1f} J"
        )
        if self._saved is not None:
            unfinished = self._impl.suspend()
            saved, self._saved = self._saved, None
            extra = {}
            if unfinished is not None:
                extra = {"unfinished_epoch_time": unfinished[0], "unfinished_epoch_energy": unfinished[1]}
            try:
                saved.write(self._record(state="interrupted", **extra))
            except OSError as error:
                saved.release()
                self._not_kept = f"its record {saved.path} could not be updated ({error})"
            else:
                saved.release()
                not_counted = ""
                if unfinished is not None:
                    not_counted = (
                        f" The unfinished epoch ({unfinished[0]:.1f} s, {unfinished[1]:.1f} J) is not counted: "
                        f"the resumed run repeats it."
                    )
                warnings.warn(
                    f"{what}. It stays open on the server and is recorded in {saved.path}: the next run of "
                    f"job {self.job.job_id} on this machine resumes it (same batch size, its reports carry these "
                    f"epochs, time and energy), so resume training from your checkpoint of epoch "
                    f"{self._impl.current_epoch}.{not_counted} To give the trial up instead, pass resume=False to "
                    f"the next run.",
                    ZeusBSOTrialWarning,
                    stacklevel=3,
                )
                return
        self._impl.end()  # PATCH /trials: the server marks it failed
        warnings.warn(
            f"{what}. It is marked failed on the server, which leaves it out of the job's statistics (batch "
            f"size {batch_size} may be dispatched again); it cannot be resumed because {self._not_kept or 'it was not recorded'}.",
            ZeusBSOTrialWarning,
            stacklevel=3,
        )

    def __del__(self) -> None:
        try:
            self._close(at_exit=sys.is_finalizing())
        except Exception:  # a server gone at exit; the C++ destructor logs its own failure
            pass

    def __repr__(self) -> str:
        return (
            f"BatchSizeOptimizer(server_url={self.server_url!r}, job_id={self.job.job_id!r}, "
            f"batch_size={self.current_batch_size}, epoch={self.cur_epoch})"
        )


def _why_closed(at_exit: bool) -> str:
    """Why an undecided trial's run ends: the exception being handled (or, at exit, the one that
    ended the program), else the loop's end."""
    error = sys.exc_info()[1]
    if error is None and at_exit:
        error = getattr(sys, "last_value", None)
    if isinstance(error, KeyboardInterrupt):
        return "interrupted by KeyboardInterrupt"
    if error is not None:
        return f"the run raised {type(error).__name__}"
    if at_exit:
        return "the program exited"
    return "close() was called"
