"""Inference latency of the exported TinyVLA (ONNX, onnxruntime on one core) against the same model in torch, B = 1.

For each configuration (state-only, and one or two 64 x 64 cameras; a freshly initialised TinyVLA of the default
sizes, or ``--model`` for a trained ``model.pt``: latency does not depend on the weights), the model is exported with
:func:`upright.vla.export.export_onnx` and timed, one observation per call, after ``--warmup`` untimed calls:

- **onnxruntime**: ``InferenceSession.run`` with ``intra_op_num_threads = inter_op_num_threads = 1`` (one core, as a
  robot's onboard computer would give a policy thread);
- **torch**: the same graph's ``forward`` under ``torch.no_grad()`` with ``torch.set_num_threads(1)``.

Rows are interleaved (one call of each per round) so that load from other processes falls on both alike; the report
gives min, p50, p90, p99 in ms, the p50 ratio torch / onnxruntime, and the share of the CPU other processes used
(``benchmarks/machine.py``).

    python benchmarks/bench_vla_onnx.py --out docs/bench_vla_onnx.md
    python benchmarks/bench_vla_onnx.py --calls 200            # quicker
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import CpuMeter, cpu_model, latency_percentiles

CONFIGS = {"state only": (), "front camera 64x64": ("front",), "front + wrist 64x64": ("front", "wrist")}
"""Configurations timed: name -> cameras."""


def measure(cameras: tuple[str, ...], calls: int, warmup: int, model_path: str | None = None) -> dict:
    """Latencies (ms) of onnxruntime and torch for one TinyVLA configuration (module docstring)."""
    import onnxruntime as ort
    import torch

    from upright.vla.export import _ImageGraph, _StateGraph, example_inputs, export_onnx, input_names
    from upright.vla.tiny import TinyVLA, TinyVLAConfig

    torch.manual_seed(0)
    model = TinyVLA.load(model_path) if model_path else TinyVLA(TinyVLAConfig(cameras=cameras))
    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "policy.onnx")
        export_onnx(model, path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    inputs = example_inputs(model, batch=1)
    feed = {name: t.numpy() for name, t in zip(input_names(model), inputs)}
    torch.set_num_threads(1)
    graph = (_ImageGraph(model) if model.cfg.cameras else _StateGraph(model)).eval()
    times = {"onnxruntime": [], "torch": []}
    with torch.no_grad():
        for k in range(warmup + calls):
            for name in ("onnxruntime", "torch") if k % 2 == 0 else ("torch", "onnxruntime"):
                t0 = time.perf_counter()
                if name == "onnxruntime":
                    session.run(None, feed)
                else:
                    graph(*inputs)
                if k >= warmup:
                    times[name].append(1e3 * (time.perf_counter() - t0))
    return {
        "parameters": model.num_parameters(),
        "chunk": model.cfg.chunk_size,
        "action_dim": model.cfg.action_dim,
        **{name: latency_percentiles(ms) for name, ms in times.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--model", default=None, help="a trained model.pt (its cameras), instead of the three configs")
    parser.add_argument("--out", default=None, help="markdown report")
    args = parser.parse_args(argv)
    if args.calls < 10 or args.warmup < 0:
        parser.error("--calls must be >= 10 and --warmup >= 0")
    meter = CpuMeter().start()
    configs = {"--model " + args.model: None} if args.model else CONFIGS
    rows = []
    for name, cameras in configs.items():
        r = measure(cameras or (), args.calls, args.warmup, args.model)
        rows.append((name, r))
        print(
            f"{name}: onnxruntime p50 {r['onnxruntime']['p50']:.3f} ms p99 {r['onnxruntime']['p99']:.3f} ms; "
            f"torch p50 {r['torch']['p50']:.3f} ms",
            flush=True,
        )
    others = meter.stop()
    lines = [
        "# TinyVLA ONNX inference latency, one core, B = 1",
        "",
        f"{datetime.datetime.now().isoformat(timespec='seconds')}; {cpu_model()}, {os.cpu_count()} CPUs; "
        f"{args.calls} timed calls per row after {args.warmup} untimed, interleaved.",
        f"Other processes used {100 * others:.0f} % of the CPU during the run"
        + (" (CPU idle)." if others < 0.05 else " (a shared CPU: compare the rows, not the absolute figures)."),
        "",
        "| configuration | parameters | chunk | runtime | min ms | p50 ms | p90 ms | p99 ms |",
        "|---|---:|---|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        for rt in ("onnxruntime", "torch"):
            p = r[rt]
            lines.append(
                f"| {name} | {r['parameters']:,} | {r['chunk']} x {r['action_dim']} | {rt} | {p['min']:.3f} | "
                f"{p['p50']:.3f} | {p['p90']:.3f} | {p['p99']:.3f} |"
            )
    lines += [
        "",
        "p50 torch / onnxruntime: "
        + ", ".join(f"{name} {r['torch']['p50'] / r['onnxruntime']['p50']:.2f}x" for name, r in rows)
        + ".",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
