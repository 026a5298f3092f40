"""Round-trip latency of the openpi policy server on loopback vs. the policy's own in-process time (a script).

The server (``python -m upright.vla.server``, i.e. ``upright-policy-server``) runs in its own process on a free
port, serving :class:`~upright.vla.linear.LinearChunkPolicy` (chunk H x A, a tiny linear map: the figures are the
protocol's overhead, not a model's). In this process, for each payload (state only; state + 2 x 224x224x3 uint8
images with ``--images``, as openpi's LIBERO client sends):

- **in-process**: ``predict_action_chunk`` of an identical policy (same seed) on the same observation, B = 1;
- **server infer**: the server's own ``server_timing["infer_ms"]`` (the same call, timed in the server);
- **RemotePolicy**: ``predict_action_chunk`` through :class:`~upright.vla.remote.RemotePolicy` (batch -> openpi
  observation, pack, websocket, unpack, reply);
- **openpi-client**: ``WebsocketClientPolicy.infer`` of the real openpi-client package (when installed).

Each: min, median, p90, p99 over ``--requests`` calls after ``--warmup`` untimed ones, the rows interleaved (one
call of each per round, rotating order) so that a shared CPU's load falls on all alike; the overhead is the round
trip's median minus the in-process median. ``--note`` adds a line (e.g. what else ran on the machine).

``--base-throughput``: instead, base queries per second for a residual-RL base (``policy.base``) at B envs
(``--batch-sizes``, default 64 and 256): the base (``--base``, default the committed residual run's TinyVLA,
``upright/assets/policies/panda_lift_residual/base_model.pt``: 49-value env observation, 10 x 8 chunks) in this process
(``predict_action_chunk`` on the batch), and served by ``upright-policy-server`` in its own process and asked through
:class:`~upright.vla.remote.RemotePolicy` for the B rows (one openpi request per row):

- **remote sequential**: one round trip per row (``max_in_flight=1``), server answering one request at a time
  (``--max-batch 1``, as openpi's server): what ``RemotePolicy`` did before pipelining;
- **remote pipelined, server 1 at a time**: all B requests sent before the replies are read (``max_in_flight=256``),
  the same one-at-a-time server: the gain any openpi server gets;
- **remote pipelined, server batching**: the same, ``upright-policy-server``'s default ``--max-batch 256`` (the
  requests that arrived together answered by one policy call);
- **remote pipelined, 4 connections, server batching**: the rows spread over 4 websocket connections.

Queries/s = B / median batch time over ``--requests`` timed batches (interleaved rounds); each remote row's chunks
are checked against the local ones (max |difference|, float32 rounding of other batch sizes).

Usage::

    python benchmarks/bench_policy_server.py --images --out docs/bench_policy_server.md
    python benchmarks/bench_policy_server.py --requests 200 --chunk-size 10   # quicker, state only
    python benchmarks/bench_policy_server.py --base-throughput --requests 30 --out docs/bench_remote_base.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, latency_percentiles

from upright.vla.keymap import observation_to_batch
from upright.vla.linear import LinearChunkPolicy
from upright.vla.remote import RemotePolicy


def _stats(ms: list[float]) -> tuple[float, float, float, float]:
    p = latency_percentiles(ms)
    return p["min"], p["p50"], p["p90"], p["p99"]


def _time_interleaved(fns: dict, n: int, warmup: int) -> dict[str, list[float]]:
    """{name: n latencies ms}: one call of each function per round, in rotating order, so that the load of a
    shared CPU falls on every row alike."""
    names = list(fns)
    out = {k: [] for k in names}
    for i in range(warmup + n):
        order = names[i % len(names) :] + names[: i % len(names)]
        for k in order:
            t0 = time.perf_counter()
            fns[k]()
            if i >= warmup:
                out[k].append((time.perf_counter() - t0) * 1000.0)
    return out


def _start_server(args, cameras: str, policy: list[str] | None = None) -> tuple[subprocess.Popen, int]:
    """``upright-policy-server`` in its own process on a free port: the linear policy (``cameras``), or ``policy``
    (``--policy`` and further server arguments)."""
    cmd = [sys.executable, "-m", "upright.vla.server", "--port", "0"]
    cmd += policy or [
        "--policy",
        "upright.vla.linear:make_linear_policy",
        "--arg",
        f"state_dim={args.state_dim}",
        "--arg",
        f"chunk_size={args.chunk_size}",
        "--arg",
        f"action_dim={args.action_dim}",
        "--arg",
        f"cameras={cameras}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"on ws://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError("the policy server did not start")


def bench_payload(args, images: bool) -> list[tuple[str, list[float]]]:
    """[(row name, latencies ms)] for one payload."""
    cameras = "front,wrist" if images else ""
    rng = np.random.default_rng(0)
    obs = {"observation/state": rng.normal(size=args.state_dim).astype(np.float32), "prompt": "pick up the cube"}
    if images:
        obs["observation/image"] = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
        obs["observation/wrist_image"] = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    policy = LinearChunkPolicy(
        args.state_dim, args.chunk_size, args.action_dim, tuple(c for c in cameras.split(",") if c)
    )
    batch = observation_to_batch(obs, cameras=policy.cameras)
    proc, port = _start_server(args, cameras)
    try:
        remote = RemotePolicy(port=port, timeout=120)
        infer_ms = []

        def in_process():
            with torch.no_grad():
                policy.predict_action_chunk(batch)

        def remote_call():
            remote.predict_action_chunk(batch)
            infer_ms.append(remote.last_server_timing["infer_ms"])

        fns = {"in-process predict_action_chunk": in_process, "RemotePolicy round trip": remote_call}
        try:
            from openpi_client.websocket_client_policy import WebsocketClientPolicy
        except ImportError:
            print("openpi-client not installed (pip install --no-deps openpi-client==0.1.2): row skipped")
            client = None
        else:
            client = WebsocketClientPolicy("127.0.0.1", port)
            fns["openpi-client round trip"] = lambda: client.infer(obs)
        rows = list(_time_interleaved(fns, args.requests, args.warmup).items())
        rows.insert(1, ("server infer_ms (server_timing)", infer_ms[args.warmup :]))
        remote.close()
        if client is not None:
            client._ws.close()  # WebsocketClientPolicy has no close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return rows


ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_BASE = ROOT / "upright" / "assets" / "policies" / "panda_lift_residual" / "base_model.pt"


def _shown(path: pathlib.Path) -> str:
    """``path`` relative to the repository when inside it (reports hold no machine-specific prefix)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def bench_base_throughput(args) -> list[str]:
    """Report lines of ``--base-throughput`` (module docstring)."""
    from upright.tasks.lift.vla_io import TASK
    from upright.vla.tiny import TinyVLA

    local = TinyVLA.load(args.base)
    c = local.cfg
    lines = [
        "## Residual-RL base queries per second (`--base-throughput`)",
        "",
        f"Base: TinyVLA `{_shown(args.base)}` (state {c.state_dim} = {c.state_key}, cameras "
        f"{list(c.cameras) or 'none'}, chunk {c.chunk_size} x {c.action_dim}); one query = one env's chunk. "
        "Local: `predict_action_chunk` on the batch in this process (torch, 1 thread). Remote: "
        "`upright-policy-server` in its own process "
        f"(OMP_NUM_THREADS=1), `RemotePolicy` here; {args.requests} timed batches per row after "
        f"{args.warmup_batches} untimed, the rows interleaved.",
        "",
        "| B | row | median ms / batch | p90 ms | queries/s | vs sequential | max abs diff vs local |",
        "|---|---|---|---|---|---|---|",
    ]
    servers = {mb: _start_server(args, "", ["--policy", str(args.base), "--max-batch", str(mb)]) for mb in (1, 256)}
    try:
        for b in args.batch_sizes:
            rng = np.random.default_rng(b)
            batch = {
                "observation.state": torch.from_numpy(rng.normal(size=(b, c.state_dim)).astype(np.float32)),
                "task": [TASK] * b,
            }
            with torch.no_grad():
                want = local.predict_action_chunk(batch)
            clients = {
                "remote sequential (1 round trip per row, server 1 at a time)": RemotePolicy(
                    port=servers[1][1], max_in_flight=1, timeout=120
                ),
                "remote pipelined, server 1 at a time (`--max-batch 1`, as openpi's)": RemotePolicy(
                    port=servers[1][1], max_in_flight=256, timeout=120
                ),
                "remote pipelined, server batching (`--max-batch 256`)": RemotePolicy(
                    port=servers[256][1], max_in_flight=256, timeout=120
                ),
                "remote pipelined, 4 connections, server batching": RemotePolicy(
                    port=servers[256][1], max_in_flight=256, connections=4, timeout=120
                ),
            }
            diffs = {k: float((r.predict_action_chunk(batch) - want).abs().max()) for k, r in clients.items()}

            def local_call(batch=batch):
                with torch.no_grad():
                    local.predict_action_chunk(batch)

            fns = {"local (in-process predict_action_chunk)": local_call}
            fns.update({k: (lambda r=r, batch=batch: r.predict_action_chunk(batch)) for k, r in clients.items()})
            times = _time_interleaved(fns, args.requests, args.warmup_batches)
            seq = _stats(times[next(iter(clients))])[1]
            for name, ms in times.items():
                _, med, p90, _ = _stats(ms)
                diff = f"{diffs[name]:.1e}" if name in diffs else "-"
                lines.append(
                    f"| {b} | {name} | {med:.2f} | {p90:.2f} | {b / med * 1000.0:,.0f} | {seq / med:.1f}x | {diff} |"
                )
            for r in clients.values():
                r.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
    return lines + [""]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=1000, help="timed calls per row (default 1000)")
    p.add_argument("--warmup", type=int, default=50, help="untimed calls first (default 50)")
    p.add_argument("--state-dim", type=int, default=8)
    p.add_argument("--chunk-size", type=int, default=50, help="H (default 50, pi0's action horizon)")
    p.add_argument("--action-dim", type=int, default=7)
    p.add_argument("--images", action="store_true", help="also the 2 x 224x224x3 uint8 image payload")
    p.add_argument(
        "--base-throughput",
        action="store_true",
        help="base queries/s for residual RL: local vs remote sequential vs remote pipelined (docstring)",
    )
    p.add_argument("--base", type=pathlib.Path, default=DEFAULT_BASE, help="with --base-throughput: a TinyVLA model.pt")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256], help="with --base-throughput: B values")
    p.add_argument("--warmup-batches", type=int, default=3, help="with --base-throughput: untimed batches first")
    p.add_argument("--out", help="also write the Markdown report to this file")
    p.add_argument("--note", default="", help="a line for the report (e.g. what else ran on the machine)")
    args = p.parse_args()
    torch.set_num_threads(1)
    load0 = os.getloadavg()
    lines = [
        f"# bench_policy_server ({datetime.datetime.now().isoformat(timespec='seconds')})",
        "",
        f"{platform.platform()}, Python {platform.python_version()}, {cpu_model()}, {os.cpu_count()} CPUs, "
        f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at start",
        "",
        "Command: `python benchmarks/bench_policy_server.py "
        + " ".join(f'"{a}"' if " " in a else a for a in sys.argv[1:])
        + "`",
        "",
    ] + ([args.note, ""] if args.note else [])
    if args.base_throughput:
        lines += bench_base_throughput(args)
    else:
        lines += [
            f"Policy: LinearChunkPolicy, state {args.state_dim}, chunk {args.chunk_size} x {args.action_dim} "
            f"float32; server in its own process on 127.0.0.1; {args.requests} timed requests per row after "
            f"{args.warmup} untimed, the rows interleaved.",
            "",
        ]
    for images in [] if args.base_throughput else [False, True] if args.images else [False]:
        rows = bench_payload(args, images)
        base = _stats(rows[0][1])[1]
        payload = (
            "state + 2 x 224x224x3 uint8 images + prompt" if images else f"state ({args.state_dim} float32) + prompt"
        )
        lines += [
            f"## {payload}",
            "",
            "| measurement | min ms | median ms | p90 ms | p99 ms | median / in-process | overhead ms (median) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, ms in rows:
            lo, med, p90, p99 = _stats(ms)
            lines.append(
                f"| {name} | {lo:.3f} | {med:.3f} | {p90:.3f} | {p99:.3f} | {med / base:.1f} | {med - base:.3f} |"
            )
        lines.append("")
    load1 = os.getloadavg()
    lines.append(f"load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)


if __name__ == "__main__":
    main()
