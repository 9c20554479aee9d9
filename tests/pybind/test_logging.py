"""The native log through Python's logging (docs/python.md, "Logging"): records of the module's
logger at the right level, a native thread's lines delivered without deadlock, levels honoured
both ways (a Python level decides what the native side formats; ZEUS_LOG_LEVEL sets the
``zeus_cpp`` logger's level), stderr as before when nothing is configured, and a clean exit while
a native thread keeps logging."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO, subprocess_env

zeus_cpp = pytest.importorskip("zeus_cpp")
from zeus_cpp import _logging, _zeus  # noqa: E402

WARN, ERROR, INFO, DEBUG = 3, 4, 2, 1  # native (spdlog) levels


@pytest.fixture(autouse=True)
def _levels_restored():
    names = ["zeus_cpp", *_zeus._log_modules()]
    before = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


def records(caplog, name: str):
    return [record for record in caplog.records if record.name == name]


def test_a_native_line_is_a_record_of_its_modules_logger(caplog) -> None:
    caplog.set_level(logging.WARNING)
    _zeus._log_for_test("zeus_cpp.optimizer.power_limit", WARN, "50% of the steps, {braces}")
    [record] = records(caplog, "zeus_cpp.optimizer.power_limit")
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "50% of the steps, {braces}"
    assert record.thread == threading.get_ident()


def test_a_library_warning_comes_from_the_monitor_logger(caplog) -> None:
    """A real one: profile_parameters with its defaults warns how long it will take."""
    from zeus_cpp import profile
    from zeus_cpp.monitor import ZeusMonitor

    caplog.set_level(logging.WARNING)
    calls = []

    def target() -> None:
        calls.append(1)
        if len(calls) > 10 + 100:  # the default warm-up and calibration iterations
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        profile.profile_parameters(target, ZeusMonitor(gpu_indices=[0]))
    found = [record for record in caplog.records
             if "profile: sweeping the measurement duration" in record.getMessage()]
    assert [(record.name, record.levelno) for record in found] == [
        ("zeus_cpp.monitor", logging.WARNING)]


def test_a_native_threads_warning_arrives_while_python_waits_for_that_thread(caplog) -> None:
    """The native thread is joined with the GIL held: its line must not wait for the GIL."""
    caplog.set_level(logging.WARNING)
    done = threading.Event()

    def log_from_a_native_thread() -> None:
        _zeus._log_for_test("zeus_cpp.device", WARN, "from a native thread", native_thread=True)
        done.set()

    caller = threading.Thread(target=log_from_a_native_thread, daemon=True)
    caller.start()
    assert done.wait(30), "the native thread's line deadlocked"
    assert _logging.flush(30)
    [record] = records(caplog, "zeus_cpp.device")
    assert record.levelno == logging.WARNING and record.getMessage() == "from a native thread"
    assert record.thread not in (threading.get_ident(), caller.ident)


def test_error_level_silences_warnings_on_the_native_side_too(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger("zeus_cpp").setLevel(logging.ERROR)
    assert _zeus._log_level("zeus_cpp.monitor") == ERROR  # warnings are not even formatted
    _zeus._log_for_test("zeus_cpp.monitor", WARN, "silenced")
    _zeus._log_for_test("zeus_cpp.monitor", WARN, "silenced too", native_thread=True)
    _zeus._log_for_test("zeus_cpp.monitor", ERROR, "an error")
    assert _logging.flush(30)
    assert [r.getMessage() for r in records(caplog, "zeus_cpp.monitor")] == ["an error"]


def test_a_lower_python_level_turns_native_debug_lines_on(caplog) -> None:
    assert _zeus._log_level("zeus_cpp.device") >= WARN
    caplog.set_level(logging.DEBUG, logger="zeus_cpp.device")  # Logger.setLevel
    assert _zeus._log_level("zeus_cpp.device") == DEBUG
    assert _zeus._log_level("zeus_cpp.monitor") >= WARN  # only that module
    _zeus._log_for_test("zeus_cpp.device", DEBUG, "a debug line")
    [record] = records(caplog, "zeus_cpp.device")
    assert record.levelno == logging.DEBUG


def test_logging_disable_reaches_the_native_side() -> None:
    logging.disable(logging.CRITICAL)
    try:
        assert _zeus._log_level("zeus_cpp") == 6  # off
    finally:
        logging.disable(logging.NOTSET)
    assert _zeus._log_level("zeus_cpp") <= WARN


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=subprocess_env(env),
                          capture_output=True, text=True, timeout=120)


def test_without_handlers_lines_go_to_stderr_as_before() -> None:
    result = run("import zeus_cpp._zeus as z, zeus_cpp\n"
                 "z._log_for_test('zeus_cpp.monitor', 3, 'plain warning')\n"
                 "z._log_for_test('zeus_cpp.monitor', 2, 'hidden info')\n")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "[zeus W] plain warning\n"


def test_zeus_log_level_sets_the_package_loggers_level() -> None:
    result = run("import logging, zeus_cpp, zeus_cpp._zeus as z\n"
                 "print(logging.getLogger('zeus_cpp').level, z._log_level('zeus_cpp.device'))\n"
                 "z._log_for_test('zeus_cpp.device', 2, 'an info line')\n",
                 ZEUS_LOG_LEVEL="info")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(logging.INFO), str(INFO)]
    assert "[zeus I] an info line" in result.stderr


def test_the_interpreter_exits_while_a_native_thread_keeps_logging() -> None:
    code = ("import logging, sys, zeus_cpp._zeus as z\n"
            "logging.basicConfig(stream=sys.stdout, format='%(name)s %(message)s')\n"
            "z._log_for_test('zeus_cpp.monitor', 3, 'line', detached_lines=100000)\n"
            "import time; time.sleep(0.2)\n")
    start = time.monotonic()
    result = run(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - start < 60
    assert "zeus_cpp.monitor line 0" in result.stdout  # through logging while Python ran


def test_the_docs_logging_example_runs() -> None:
    text = (REPO / "docs" / "python.md").read_text()
    section = text.split("\n## Logging\n", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]
    result = run(example + "import zeus_cpp._zeus as z\n"
                 "z._log_for_test('zeus_cpp.monitor', 2, 'an info line')\n"
                 "z._log_for_test('zeus_cpp.device', 3, 'a device warning')\n")
    assert result.returncode == 0, result.stderr
    assert "zeus_cpp.monitor INFO an info line" in result.stderr
    assert "a device warning" not in result.stderr  # zeus_cpp.device at ERROR
