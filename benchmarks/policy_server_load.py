"""Load test of ``upright-policy-server``: 50 concurrent openpi clients, with and without a client that never reads.

A script (not a test). For each scenario (``--flooders``, default ``0,1``) a fresh server runs in its own process
(``python -m upright.vla.server``, or ``--server-cmd``) serving :class:`~upright.vla.linear.LinearChunkPolicy` (the
policy of ``tests/vla/test_policy_server.py``: an 8-value state, cameras ``front`` and ``wrist``, a ``--chunk-size``
x ``--action-dim`` chunk; a tiny linear map, so the figures are the server's, not a model's). Then:

- ``--clients`` real openpi clients (``openpi_client.websocket_client_policy.WebsocketClientPolicy``, 0.1.2), spread
  over ``--procs`` processes (threads inside; processes so that one client GIL does not time all of them), each
  calling ``infer`` in a loop for ``--duration`` seconds on an openpi LIBERO-like observation (state + 2 x
  ``--image-size``\\ ² x 3 uint8 images, ~301 kB at 224: what openpi's LIBERO client sends);
- ``--flooders`` clients that send the same requests as fast as the server takes them and never read a reply
  (a small receive buffer; each sends at most ``--flood-mb`` MB, so that an unbounded server cannot take the machine).

Reported per scenario: requests answered in the window, requests/s, errors (exceptions of ``infer``: refused or lost
connections, error replies), p50 / p99 round-trip latency (ms, every answered request of every client), the server's
RSS (MB, ``VmRSS`` of ``/proc/PID/status`` sampled every 0.1 s): after a warm-up request (start), the peak during the
run, and 3 s after every client has disconnected (after); and the flooders' bytes sent and when they were dropped.

"Before" figures: run the same script against an older checkout by pointing ``--server-cmd`` at it, e.g. for commit
``bb565dd`` (before issue 33 §5)::

    git worktree add --detach /tmp/before_srv bb565dd
    mkdir -p /tmp/before_srv_pkg && ln -s /tmp/before_srv /tmp/before_srv_pkg/upright   # the package is the repo root
    python benchmarks/policy_server_load.py --label bb565dd \\
        --server-cmd "env PYTHONPATH=/tmp/before_srv_pkg python -m upright.vla.server" --csv load.csv
    python benchmarks/policy_server_load.py --label after --csv load.csv
    git worktree remove --force /tmp/before_srv

``--server-cmd`` is split like a shell command line; the policy options and ``--port 0`` are appended. The server's
own log goes to ``--server-log`` (default: discarded, read only for its port).
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, latency_percentiles

COLUMNS = (
    "server",
    "clients",
    "flooders",
    "duration_s",
    "requests",
    "req_per_s",
    "errors",
    "p50_ms",
    "p99_ms",
    "rss_start_mb",
    "rss_peak_mb",
    "rss_after_mb",
    "flood_sent_mb",
    "flooder_dropped_after_s",
)


def _observation(rng: np.random.Generator, image_size: int) -> dict:
    """openpi's LIBERO keys: (S,) float state, two (H, W, 3) uint8 images, a prompt."""
    obs = {"observation/state": rng.normal(size=8).astype(np.float32), "prompt": "pick up the red cube"}
    if image_size:
        for key in ("observation/image", "observation/wrist_image"):
            obs[key] = rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8)
    return obs


def _rss_mb(pid: int) -> float:
    """VmRSS of ``pid``, MB (0 once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024.0
    except (OSError, AttributeError):
        return 0.0


def _client_process(
    port: int, n_threads: int, start_at: float, stop_at: float, image_size: int, seed: int, out: mp.Queue
) -> None:
    """``n_threads`` openpi clients in this process; puts (latencies ms, errors, first error text) on ``out``."""
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    lat: list[float] = []
    errors = [0]
    first_error: list[str] = []
    lock = threading.Lock()

    def one(k: int) -> None:
        obs = _observation(np.random.default_rng(seed * 1000 + k), image_size)
        client = None
        mine: list[float] = []
        while time.time() < stop_at:
            try:
                if client is None:
                    client = WebsocketClientPolicy("127.0.0.1", port)
                while time.time() < start_at:
                    time.sleep(0.01)
                t0 = time.perf_counter()
                client.infer(obs)
                mine.append((time.perf_counter() - t0) * 1000.0)
            except Exception as e:  # noqa: BLE001  (counted)
                with lock:
                    errors[0] += 1
                    first_error[:] = first_error or [f"{type(e).__name__}: {e}"[:200]]
                if client is not None:
                    client._ws.close()
                client = None
                time.sleep(0.1)
        if client is not None:
            client._ws.close()  # WebsocketClientPolicy has no close()
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((lat, errors[0], first_error[0] if first_error else ""))


def _flood(port: int, message: bytes, cap_bytes: int, stop: threading.Event, report: dict) -> None:
    """A client that sends ``message`` until ``cap_bytes`` are sent, ``stop`` is set or the server drops it, and
    never reads a reply (receive buffer 64 KiB, websockets' queue of 1 frame)."""
    import websockets.sync.client

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.connect(("127.0.0.1", port))
    ws = websockets.sync.client.connect(
        f"ws://127.0.0.1:{port}", sock=sock, compression=None, max_size=None, max_queue=1, close_timeout=1
    )
    t0, sent = time.monotonic(), 0
    try:
        while sent + len(message) <= cap_bytes and not stop.is_set():
            ws.send(message)
            sent += len(message)
    except Exception:  # noqa: BLE001  (dropped by the server)
        report["dropped_after_s"] = time.monotonic() - t0
    finally:
        report["sent"] = report.get("sent", 0) + sent
        stop.wait()  # hold the connection (never reading) until the run ends
        sock.close()


def _start_server(cmd: list[str], log_path: str | None) -> tuple[subprocess.Popen, int]:
    """The server process and its port (read from its log line ``serving ... on ws://127.0.0.1:PORT``)."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    log = open(log_path, "a") if log_path else None
    port: list[int] = []
    found = threading.Event()

    def drain() -> None:
        for line in proc.stderr:
            if log:
                log.write(line)
                log.flush()
            m = re.search(r"on ws://127\.0\.0\.1:(\d+)", line)
            if m and not port:
                port.append(int(m.group(1)))
                found.set()
        if log:
            log.close()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    found.wait(timeout=300)
    if not port:
        proc.kill()
        raise SystemExit(f"the server did not start: {' '.join(cmd)}")
    return proc, port[0]


def run_scenario(args, n_flooders: int) -> dict:
    """One scenario on a fresh server: the row of :data:`COLUMNS`."""
    from openpi_client import msgpack_numpy
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    cmd = (
        shlex.split(args.server_cmd)
        + [
            "--policy",
            "upright.vla.linear:make_linear_policy",
            "--arg",
            "state_dim=8",
            "--arg",
            f"chunk_size={args.chunk_size}",
            "--arg",
            f"action_dim={args.action_dim}",
            "--port",
            "0",
        ]
        + (["--arg", "cameras=front,wrist"] if args.image_size else [])
    )
    proc, port = _start_server(cmd, args.server_log)
    try:
        warm = WebsocketClientPolicy("127.0.0.1", port)
        obs = _observation(np.random.default_rng(0), args.image_size)
        warm.infer(obs)
        warm._ws.close()
        time.sleep(0.5)
        rss_start = _rss_mb(proc.pid)
        peak = [rss_start]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                peak[0] = max(peak[0], _rss_mb(proc.pid))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        start_at = time.time() + args.connect_s
        stop_at = start_at + args.duration
        per = [args.clients // args.procs + (i < args.clients % args.procs) for i in range(args.procs)]
        procs = [
            ctx.Process(target=_client_process, args=(port, n, start_at, stop_at, args.image_size, i, out))
            for i, n in enumerate(per)
            if n
        ]
        for p in procs:
            p.start()
        stop_flood, flood = threading.Event(), {}
        message = msgpack_numpy.packb(obs)
        while time.time() < start_at:
            time.sleep(0.01)
        flooders = [
            threading.Thread(target=_flood, args=(port, message, args.flood_mb * 10**6, stop_flood, flood), daemon=True)
            for _ in range(n_flooders)
        ]
        for t in flooders:
            t.start()
        results = [out.get(timeout=args.duration + args.connect_s + 300) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        stop_flood.set()
        for t in flooders:
            t.join(timeout=10)
        time.sleep(3.0)  # every client has gone: what the server keeps
        sampling.set()
        sampler.join()
        rss_after = _rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    lat = [x for r in results for x in r[0]]
    errors = sum(r[1] for r in results)
    first_errors = sorted({r[2] for r in results if r[2]})
    p = latency_percentiles(lat) if lat else {"p50": float("nan"), "p99": float("nan")}
    dropped = flood.get("dropped_after_s")
    row = {
        "server": args.label,
        "clients": args.clients,
        "flooders": n_flooders,
        "duration_s": args.duration,
        "requests": len(lat),
        "req_per_s": round(len(lat) / args.duration, 1),
        "errors": errors,
        "p50_ms": round(p["p50"], 2),
        "p99_ms": round(p["p99"], 2),
        "rss_start_mb": round(rss_start),
        "rss_peak_mb": round(peak[0]),
        "rss_after_mb": round(rss_after),
        "flood_sent_mb": round(flood.get("sent", 0) / 1e6) if n_flooders else "",
        "flooder_dropped_after_s": (round(dropped, 1) if dropped is not None else "no") if n_flooders else "",
    }
    if first_errors:
        print(f"# {args.label}, {n_flooders} flooders: first errors: {first_errors}", file=sys.stderr)
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=50, help="concurrent openpi clients (default 50)")
    p.add_argument("--procs", type=int, default=5, help="processes the clients are spread over (default 5)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of load per scenario (default 20)")
    p.add_argument("--connect-s", type=float, default=10.0, help="seconds given to the clients to connect first")
    p.add_argument(
        "--flooders",
        default="0,1",
        help="comma-separated numbers of never-reading clients, one scenario each (default 0,1)",
    )
    p.add_argument("--flood-mb", type=int, default=1000, help="most MB each flooder sends (default 1000)")
    p.add_argument("--image-size", type=int, default=224, help="H = W of the 2 camera images (0: state only)")
    p.add_argument("--chunk-size", type=int, default=50, help="H of the chunk (default 50, as pi0)")
    p.add_argument("--action-dim", type=int, default=32, help="A (default 32, pi0's model output)")
    p.add_argument(
        "--server-cmd",
        default=f"{sys.executable} -m upright.vla.server",
        help="command that runs the server (module docstring for a 'before' checkout)",
    )
    p.add_argument("--server-log", default=None, help="append the server's log to this file")
    p.add_argument("--label", default="this checkout", help="name of the server in the table")
    p.add_argument("--csv", default=None, help="append the rows to this CSV file (header written when new)")
    p.add_argument("--note", default="", help="a line printed under the table (e.g. the machine's load)")
    args = p.parse_args(argv)
    rows = [run_scenario(args, int(n)) for n in args.flooders.split(",")]
    print(
        f"# {cpu_model()}, {os.cpu_count()} CPUs; {args.clients} clients over {args.procs} processes, "
        f"{args.duration:g} s, images {args.image_size or 'none'}, chunk {args.chunk_size} x {args.action_dim}"
    )
    if args.note:
        print(f"# {args.note}")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    if args.csv:
        new = not os.path.exists(args.csv)
        with open(args.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            if new:
                w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
