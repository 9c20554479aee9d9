"""The record, on this machine, of a batch-size-optimizer trial that is still open on the server,
so that a run interrupted before the server decided (Ctrl-C, a crash, a loop that ended early) is
continued by the job's next run instead of being lost or counted as a cheap failure.

One file per open trial, `<state dir>/<job dir>/trial-<number>.json`, rewritten after every
report. The process that runs the trial holds an exclusive `flock` on its file, so another run of
the job on this machine never takes a trial that is still running; the kernel releases the lock
however the process ends (even SIGKILL), and the file then holds the totals of the last reported
epoch. See docs/python-optimizers.md ("Interruption and resumption").
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
from pathlib import Path

__all__ = ["SavedTrial", "default_state_dir", "job_directory", "saved_trials"]

FORMAT = 1
# A record is a few hundred bytes; anything larger is not one of ours.
MAX_RECORD_BYTES = 64 * 1024


def default_state_dir() -> Path:
    """$ZEUS_BSO_STATE_DIR, else $XDG_STATE_HOME/zeus_cpp/bso, else ~/.local/state/zeus_cpp/bso."""
    explicit = os.environ.get("ZEUS_BSO_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "zeus_cpp" / "bso"


def job_directory(state_dir: Path, server_url: str, job_id: str) -> Path:
    """One directory per (server, job): a readable part of the job id and a hash of both."""
    digest = hashlib.sha256(f"{server_url}\0{job_id}".encode()).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", job_id)[:64]
    return Path(state_dir) / f"{readable}-{digest}"


class SavedTrial:
    """A trial file this process holds (locked). `record` is what it last wrote."""

    def __init__(self, path: Path, fd: int, record: dict) -> None:
        self.path = path
        self._fd = fd
        self.record = record

    @classmethod
    def create(cls, directory: Path, record: dict) -> "SavedTrial":
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / f"trial-{record['trial_number']}.json"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        saved = cls(path, fd, record)
        saved.write(record)
        return saved

    def write(self, record: dict) -> None:
        data = (json.dumps({"format": FORMAT, **record}, indent=1) + "\n").encode()
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, data)
        self.record = record

    def release(self) -> None:
        """Keeps the file for the next run and lets it be taken."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def remove(self) -> None:
        """The trial is over: the file goes (while still locked, so nobody takes it meanwhile)."""
        if self._fd >= 0:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            self.release()


def _trial_number(path: Path) -> int:
    match = re.fullmatch(r"trial-(\d+)\.json", path.name)
    return int(match.group(1)) if match else -1


def _check(record: object, server_url: str, job_id: str, batch_sizes: list[int]) -> str:
    """What is wrong with a record ("" when nothing)."""
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return f"not a format-{FORMAT} trial record"
    if record.get("server_url") != server_url or record.get("job_id") != job_id:
        return f"it is a trial of job {record.get('job_id')!r} at {record.get('server_url')!r}"
    for key in ("batch_size", "trial_number", "epochs"):
        value = record.get(key)
        if type(value) is not int or value < (0 if key == "epochs" else 1):
            return f"{key} is {value!r}"
    if record["batch_size"] not in batch_sizes:
        return f"batch size {record['batch_size']} is not one of the job's {batch_sizes}"
    for key in ("time", "energy"):
        value = record.get(key)
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            return f"{key} is {value!r}"
    return ""


def saved_trials(directory: Path, server_url: str, job_id: str, batch_sizes: list[int]):
    """Yields (SavedTrial, None) for each trial file no running process holds, lowest trial number
    first, locked for this process; (None, problem) for a file that is not a valid record (left
    where it is, unlocked). The caller releases or removes what it takes and releases the rest."""
    try:
        paths = sorted((p for p in directory.iterdir() if _trial_number(p) > 0), key=_trial_number)
    except FileNotFoundError:
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # its trial ended meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a running process holds it
        if os.fstat(fd).st_nlink == 0:
            os.close(fd)
            continue  # removed while we opened it
        try:
            text = os.read(fd, MAX_RECORD_BYTES + 1)
            record = json.loads(text) if len(text) <= MAX_RECORD_BYTES else None
            problem = _check(record, server_url, job_id, batch_sizes)
        except (OSError, ValueError) as error:
            problem = f"unreadable ({error})"
        if problem:
            os.close(fd)
            yield None, f"{path}: {problem}"
            continue
        record.pop("format")
        yield SavedTrial(path, fd, record), None
