"""CPU load generator: K busy-loop processes (like ``stress-ng --cpu K``), alone or around a command.

Timing-sensitive tests (the deploy daemon's loop, its fault injection, its sim-robot runs) must pass on a machine
that other processes load; this script makes that load reproducible where stress-ng is not installed::

    python benchmarks/cpu_load.py --procs 2 --duration 60        # load for 60 s (or until Ctrl-C / SIGTERM)
    python benchmarks/cpu_load.py --procs 2 -- python -m pytest -q tests/deploy/test_fault_injection.py
    python benchmarks/cpu_load.py --procs 2 --repeat 3 -- python -m pytest -q tests/deploy

With a command (after ``--``) the load starts, settles ``--warmup-s`` seconds, the command runs (``--repeat`` times,
one after the other, under the same load), then the load stops; the exit status is 0 when every run passed, else the
last failing run's status. A summary line per run goes to stderr (``cpu_load: run 2/3: exit 0 in 41.3 s, load
average 4.61``) and a last one with the pass count (``cpu_load: 3/3 runs passed``).

Each busy process spins a pure-Python loop (one CPU each, at the default nice value 0, as ``stress-ng --cpu``); it
dies with this script (PR_SET_PDEATHSIG on Linux, and an explicit kill on every way out, Ctrl-C included).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

BUSY = "while True:\n    pass\n"
"""The body of each load process: one CPU at 100 %."""


def _die_with_parent() -> None:
    """In the child, before exec: get SIGKILL when the parent (this script) dies (Linux; elsewhere a no-op)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start_load(procs: int, nice: int = 0) -> list[subprocess.Popen]:
    """Start ``procs`` busy-loop processes (niceness ``nice``); return them."""

    def pre():
        _die_with_parent()
        if nice:
            os.nice(nice)

    # preexec_fn: this script has no other thread
    return [
        subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=pre, stdin=subprocess.DEVNULL) for _ in range(procs)
    ]


def stop_load(load: list[subprocess.Popen]) -> None:
    """Kill the load processes started by :func:`start_load` (by their own pids) and reap them."""
    for p in load:
        if p.poll() is None:
            p.kill()
    for p in load:
        p.wait()


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=2, help="busy-loop processes (default 2: one per core of 2 cores)")
    ap.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds of load without a command (default: until Ctrl-C / SIGTERM)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs of the command under the load (default 1)")
    ap.add_argument("--warmup-s", type=float, default=2.0, help="seconds of load before the first run (default 2)")
    ap.add_argument("--nice", type=int, default=0, help="niceness of the load processes (default 0, as stress-ng)")
    args = ap.parse_args(argv)
    if args.procs < 0 or args.repeat < 1:
        ap.error("--procs must be >= 0 and --repeat >= 1")
    return args, command


def main(argv: list[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    load = start_load(args.procs, args.nice)
    print(
        f"cpu_load: {args.procs} busy processes (pids {' '.join(str(p.pid) for p in load)}) on {os.cpu_count()} "
        f"CPUs; load average {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
        flush=True,
    )
    status = 0
    try:
        if not command:
            if args.duration is None:
                signal.pause()
            else:
                time.sleep(args.duration)
            return 0
        time.sleep(args.warmup_s)
        passed = 0
        for k in range(1, args.repeat + 1):
            t0 = time.monotonic()
            rc = subprocess.call(command)
            passed += rc == 0
            status = rc if rc != 0 else status
            print(
                f"cpu_load: run {k}/{args.repeat}: exit {rc} in {time.monotonic() - t0:.1f} s, load average "
                f"{os.getloadavg()[0]:.2f}",
                file=sys.stderr,
                flush=True,
            )
        print(f"cpu_load: {passed}/{args.repeat} runs passed", file=sys.stderr, flush=True)
        return status
    except KeyboardInterrupt:
        return 130
    finally:
        stop_load(load)


if __name__ == "__main__":
    sys.exit(main())
