"""``python -m zeus_cpp.monitor energy|power``: measure from the shell, as ``python -m zeus.monitor``.

``energy`` opens one :class:`~zeus_cpp.monitor.ZeusMonitor` window named ``zeus.monitor.energy``
and closes it at Ctrl-C (SIGINT), SIGTERM, or after ``--duration`` seconds, then prints the
:class:`~zeus_cpp.monitor.Measurement`. ``power`` runs a :class:`~zeus_cpp.monitor.PowerMonitor`
and prints ``<datetime> {'GPU0': W, ...}`` every ``--update-period`` seconds (nothing for a period
that has no sample yet); when it ends it prints the elapsed time and each GPU's energy integrated
over the same power domain it printed.

Bad arguments (including a GPU or CPU index the machine does not have) exit with status 2 and
argparse's usage message; a machine that cannot measure what was asked for (no GPU for
``power``; ``--cpu-indices`` where RAPL is missing or root-only) exits 1 with the reason and, for
permissions, the fixes.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from datetime import datetime
from typing import Callable, List, Optional, Sequence

from zeus_cpp.exception import ZeusBaseError, ZeusCPUNotFoundError, ZeusGPUInvalidArgError

ENERGY_WINDOW = "zeus.monitor.energy"
POWER_DOMAINS = ("device_instant", "device_average", "memory_average")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _index(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a device index, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a device index is never negative, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser; each subcommand's own parser is in ``parser.subcommands[name]``."""
    parser = argparse.ArgumentParser(
        prog="python -m zeus_cpp.monitor",
        description="Measure GPU (and CPU) energy or watch GPU power from the shell.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{energy,power}")
    commands.required = True

    energy = commands.add_parser(
        "energy", help="measure energy until Ctrl-C (or for --duration seconds)",
        description="Measures time and energy in one ZeusMonitor window until Ctrl-C, SIGTERM or "
        "--duration, then prints the Measurement (energies in J).",
    )
    energy.add_argument("--gpu-indices", nargs="+", type=_index, default=None, metavar="I",
                        help="GPUs to measure (default: every visible GPU)")
    energy.add_argument("--cpu-indices", nargs="+", type=_index, default=None, metavar="I",
                        help="CPU packages (RAPL) to measure (default: every readable one)")
    energy.add_argument("--duration", type=_positive_float, default=None, metavar="S",
                        help="stop after S seconds instead of waiting for Ctrl-C")

    power = commands.add_parser(
        "power", help="print GPU power every --update-period seconds",
        description="Prints the GPUs' power (W) every period until Ctrl-C, SIGTERM or "
        "--duration, then the elapsed time and the energy (J) over the same domain.",
    )
    power.add_argument("--gpu-indices", nargs="+", type=_index, default=None, metavar="I",
                       help="GPUs to watch (default: every visible GPU)")
    power.add_argument("--update-period", type=_positive_float, default=1.0, metavar="S",
                       help="seconds between printed lines (default: 1.0)")
    power.add_argument("--power-domain", choices=POWER_DOMAINS, default="device_instant",
                       help="what to sample (default: device_instant)")
    power.add_argument("--duration", type=_positive_float, default=None, metavar="S",
                       help="stop after S seconds instead of waiting for Ctrl-C")
    parser.subcommands = {"energy": energy, "power": power}  # type: ignore[attr-defined]
    return parser


class _StopSignal:
    """Turns SIGINT/SIGTERM into an event, so that the measurement is closed and printed by the
    main flow rather than torn down by a KeyboardInterrupt in the middle of a native call."""

    # The handler only flips a flag: setting a threading.Event from a signal handler could take
    # a lock the interrupted main thread already holds.
    _POLL_S = 0.05

    def __init__(self) -> None:
        self.stopped = False
        self._previous = {}

    def __enter__(self) -> "_StopSignal":
        for number in (signal.SIGINT, signal.SIGTERM):
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:  # noqa: ARG002
        self.stopped = True

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def wait(self, seconds: Optional[float]) -> bool:
        """Waits up to `seconds` (forever when None); True once a stop was asked for."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.stopped:
            left = self._POLL_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(self._POLL_S, left))
        return self.stopped


def _fail(parser: argparse.ArgumentParser, command: str, error: Exception) -> int:
    # An index the machine lacks is the user's input: argparse's status 2 with the subcommand's
    # usage. Anything else (no GPU at all, no RAPL, no permission) is the machine's: status 1,
    # the same one-line form.
    subparser = parser.subcommands[command]  # type: ignore[attr-defined]
    bad_index = isinstance(error, (ZeusGPUInvalidArgError, ZeusCPUNotFoundError)) and (
        "invalid" in str(error)
    )
    if bad_index or (
        isinstance(error, (ValueError, TypeError)) and "No GPUs available" not in str(error)
    ):
        subparser.error(str(error))
    print(f"{subparser.prog}: error: {error}", file=sys.stderr)
    return 1


def run_energy(args: argparse.Namespace, parser: argparse.ArgumentParser,
               out: Callable[[str], None]) -> int:
    from zeus_cpp.monitor.energy import ZeusMonitor

    try:
        monitor = ZeusMonitor(gpu_indices=args.gpu_indices, cpu_indices=args.cpu_indices)
    except (ZeusBaseError, ValueError, TypeError) as error:
        return _fail(parser, "energy", error)
    with _StopSignal() as stop:
        # Nothing runs on the GPUs from here: there is no work to wait for, and synchronising
        # would need a framework (torch by default) that a bare measurement does not.
        monitor.begin_window(ENERGY_WINDOW, sync_execution=False)
        out(f"Measuring energy (GPUs {monitor.gpu_indices}, CPUs {monitor.cpu_indices}); "
            + ("Ctrl-C to stop." if args.duration is None else f"for {args.duration:g} s."))
        stop.wait(args.duration)
        measurement = monitor.end_window(ENERGY_WINDOW, sync_execution=False)
    out(f"Total time (s): {measurement.time:.3f}")
    out(f"Total energy (J): {measurement.total_energy:.3f}")
    out(repr(measurement))
    return 0


def run_power(args: argparse.Namespace, parser: argparse.ArgumentParser,
              out: Callable[[str], None]) -> int:
    from zeus_cpp.monitor.power import PowerMonitor

    try:
        monitor = PowerMonitor(gpu_indices=args.gpu_indices, update_period=args.update_period,
                               power_domains=[args.power_domain])
    except (ZeusBaseError, ValueError, TypeError) as error:
        return _fail(parser, "power", error)
    try:
        with _StopSignal() as stop:
            start = time.time()
            deadline = None if args.duration is None else start + args.duration
            while True:
                wait_s = args.update_period
                if deadline is not None:
                    wait_s = min(wait_s, max(0.0, deadline - time.time()))
                if stop.wait(wait_s):
                    break
                power = monitor.get_power(power_domain=args.power_domain)
                if power is not None:
                    watts = {f"GPU{gpu}": round(value, 3) for gpu, value in power.items()}
                    out(f"{datetime.now()} {watts}")
                if deadline is not None and time.time() >= deadline:
                    break
            end = time.time()
        energy = monitor.get_energy(start, end, power_domain=args.power_domain)
    finally:
        monitor.stop()
    out("")
    out(f"Total time (s): {end - start:.3f}")
    joules = {f"GPU{gpu}": round(value, 3) for gpu, value in (energy or {}).items()}
    out(f"Total energy (J) over {args.power_domain}: {joules}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def out(line: str) -> None:
        print(line, flush=True)

    runners = {"energy": run_energy, "power": run_power}
    return runners[args.command](args, parser, out)


def _entry(argv: Optional[List[str]] = None) -> None:
    sys.exit(main(argv))


if __name__ == "__main__":
    _entry()
