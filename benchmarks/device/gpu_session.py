"""One lent GPU session, in one call: optionally the ``vlm_reward`` cost, the backend benchmark, a short Warp kernel
profile, then G1 stand-up training until the deadline, checkpointing into ``$OUT`` every minute so that the next lent
session resumes it.

Run by ``benchmarks/device/device.sh run`` after the wheels are installed (``benchmarks/device/README.md``).

1. **VLM reward cost** (``--vlm-args``, issue 37): ``benchmarks/vlm_reward_cost.py --device <GPU>`` with those
   arguments in its own process, first, for at most ``--vlm-max-s`` of the benchmark's share of time; its table goes
   into ``report.md``.
2. **Benchmark** (each (backend, N) in its own process, as ``benchmarks/bench_backends.py`` measures it): bare
   env-steps/s (``sim.step(ctrl, 4)`` + reading the state, G1 lying on the floor under random PD targets) and
   ``StandupEnv.step`` env-steps/s (domain randomisation off), for ``warp`` and ``mjx`` (``impl="jax"``) on the GPU
   and ``native`` on every CPU core, at 1,024 / 4,096 / 8,192 envs. Entries run in priority order (all backends at
   8,192 first: the target's size) and an entry is skipped when the benchmark's share of the deadline is spent, so
   training always gets ``--train-min-s``. The first Warp entry's ``first_step_s`` includes compiling the kernels.
3. **Profile**: 10 env steps of ``warp`` at the largest N with one-by-one launches under Warp's CUDA activity timer
   (``wp.timing_begin``), the kernels with the most GPU time, into ``profile.txt``.
4. **Training**: ``python train.py task=standup sim.backend=warp device=cuda:0`` (the default recipe), optionally
   ``resume=`` a checkpoint returned by an earlier session. Every ``--ckpt-every-s`` the newest ``model_<it>.pt`` is
   copied into ``$OUT`` (only the newest is kept there); at the deadline the run gets SIGTERM, saves a checkpoint
   (``train.py`` does on SIGTERM) and that one is copied too.

Files in ``--out`` (8 at most come back): ``report.md`` (the tables), ``bench.jsonl``, ``profile.txt``, ``train.log``,
``model_<it>.pt.00`` and ``.01`` with ``checkpoint.json`` (the checkpoint in parts of at most 15 MiB, since a file
comes back only up to 16 MiB; ``stage.py join`` reassembles it), ``warp_cache.tar.gz`` (Warp's compiled kernels, for
the next session, if under 15.9 MiB: a file comes back up to 16 MiB; it was 15.4 MiB on the H100).

``--rehearse`` runs the same steps on the CPU with tiny sizes (what ``benchmarks/device/rehearse.sh`` checks here).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "device"))
import stage  # noqa: E402  (found through the sys.path entries above)

ENV_STEPS = re.compile(r"^it (\d+)/(\d+) \| ([\d,]+) env-steps/s")


def log(out: pathlib.Path, text: str) -> None:
    """Print and append to ``out/report.md``."""
    print(text, flush=True)
    with open(out / "report.md", "a") as f:
        f.write(text + "\n")


def bench_child(spec: str, seconds: float, device: str) -> None:
    """In a child process: one (backend, N) of ``bench_backends.run_one``, printed as ``RESULT {json}``."""
    from bench_backends import run_one

    backend, n = spec.split(":")
    out = run_one(backend, int(n), seconds, device, env=True, use_cache=False)
    if backend == "warp":
        import warp as wp

        if device.startswith("cuda"):
            out["device_peak_mb"] = wp.get_mempool_used_mem_high(device) / 2**20
    print("RESULT " + json.dumps(out), flush=True)


def profile_child(n: int, device: str, steps: int = 10) -> None:
    """In a child process: Warp's CUDA activity timer over ``steps`` env steps of the G1 (one-by-one launches)."""
    import math

    import torch
    import warp as wp

    from upright.robots import g1
    from upright.sim.warp import WarpSim
    from upright.tasks.standup.scene import standup_scene

    model = standup_scene()
    sim = WarpSim(model, n, device=device, graph=False)
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(n, 1)
    q[:, 2], q[:, 3:7] = 0.3, torch.tensor([math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
    sim.reset_envs(torch.arange(n), q, torch.zeros(n, model.nv))
    ctrl = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32) + 0.3 * torch.randn(n, model.nu)
    ctrl = ctrl.to(device)
    for _ in range(5):
        sim.step(ctrl, 4)
    if not device.startswith("cuda"):
        print("PROFILE (Warp's activity timer needs CUDA; skipped on the CPU)")
        return
    wp.timing_begin(cuda_filter=wp.TIMING_ALL)
    for _ in range(steps):
        sim.step(ctrl, 4)
    results = wp.timing_end()
    total: dict[str, list[float]] = {}
    for r in results:
        total.setdefault(re.sub(r"_[0-9a-f]{8}.*$", "", r.name), []).append(r.elapsed)
    rows = sorted(((sum(v), len(v), k) for k, v in total.items()), reverse=True)
    grand = sum(r[0] for r in rows)
    print(f"PROFILE {steps} env steps x {n} envs: {grand:.1f} ms GPU activity ({grand / steps:.2f} ms per env step)")
    for ms, count, name in rows[:25]:
        print(f"PROFILE {ms:9.2f} ms {100 * ms / grand:5.1f} % {count:6d} x  {name}")


def run_bench(a, out: pathlib.Path, deadline: float) -> list[dict]:
    """The benchmark entries in priority order, each in a fresh process, within the benchmark's share of time."""
    order = [(b, n) for n in a.num_envs for b in a.backends]  # the sizes in the order given, every backend at each
    results = []
    bench_end = deadline - a.train_min_s
    for backend, n in order:
        left = bench_end - time.time()
        if left < 20:
            log(out, f"- skipped {backend} N={n}: the benchmark's time is spent")
            continue
        device = "cpu" if backend == "native" else a.device
        env = dict(os.environ)
        if backend == "mjx":
            env["XLA_FLAGS"] = "--xla_gpu_enable_command_buffer="  # docs/backends.md: jax 0.11.2 CUDA-graph failure
            env["UPRIGHT_MJX_IMPL"] = "jax"
        cmd = [
            sys.executable,
            __file__,
            "--_bench",
            f"{backend}:{n}",
            "--bench-seconds",
            str(a.bench_seconds),
            "--device",
            device,
        ]
        t0 = time.time()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=left, env=env, check=False)
            line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
            err = (r.stderr.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            line, err = [], f"no result within {left:.0f} s"
        res = json.loads(line[-1][7:]) if line else {"backend": backend, "n": n, "error": err[-300:]}
        res["wall_s"] = round(time.time() - t0, 1)
        res["device"] = device
        results.append(res)
        with open(out / "bench.jsonl", "a") as f:
            f.write(json.dumps(res) + "\n")
        print(json.dumps(res), flush=True)
    return results


def run_vlm(a, out: pathlib.Path, deadline: float) -> None:
    """``vlm_reward_cost.py --device <a.device> <a.vlm_args>`` in its own process; its report into ``report.md``."""
    left = min(a.vlm_max_s, deadline - a.train_min_s - time.time())
    if left < 30:
        log(out, "- skipped the vlm_reward cost: the benchmark's time is spent")
        return
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "vlm_reward_cost.py"),
        "--device",
        a.device,
        *shlex.split(a.vlm_args),
    ]
    cmd += ["--out", str(out / "vlm_cost.md")]
    log(out, f"\n## vlm_reward cost\n\n`{' '.join(cmd[1:])}`\n")
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=left, check=False)
        tail = (r.stdout + r.stderr).strip().splitlines()[-6:]
    except subprocess.TimeoutExpired as e:  # its output is bytes here, whatever text=True says
        text = b"".join(x if isinstance(x, bytes) else (x or "").encode() for x in (e.stdout, e.stderr))
        tail = [f"no result within {left:.0f} s", *text.decode(errors="replace").splitlines()[-5:]]
    report = out / "vlm_cost.md"
    if report.is_file():  # its title becomes a third-level heading under this section
        log(out, "### " + report.read_text().lstrip("# "))
    else:
        log(out, "failed:\n```\n" + "\n".join(tail) + "\n```")
    report.unlink(missing_ok=True)  # its table is in report.md (8 files come back at most)
    log(out, f"(vlm_reward cost took {time.time() - t0:.0f} s)\n")


def bench_table(results: list[dict]) -> str:
    rows = [
        "| backend | device | N | bare env-steps/s | StandupEnv env-steps/s | first step s | init s | device MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(results, key=lambda r: (r["n"], r["backend"])):
        if "error" in r:
            rows.append(f"| {r['backend']} | {r['device']} | {r['n']} | failed: {r['error']} | | | | |")
            continue
        name = r["backend"] + (f" ({r['impl']})" if "impl" in r else "")
        mb = f"{r['device_peak_mb']:,.0f}" if "device_peak_mb" in r else "n/a"
        rows.append(
            f"| {name} | {r['device']} | {r['n']} | {r['steps_per_s']:,.0f} | "
            f"{r.get('env_steps_per_s', float('nan')):,.0f} | {r['first_step_s']:.1f} | {r['init_s']:.1f} | "
            f"{mb} |"
        )
    return "\n".join(rows)


def newest_checkpoint(run_dir: pathlib.Path) -> pathlib.Path | None:
    ckpts = [p for p in run_dir.glob("model_*.pt") if p.stem[6:].isdigit()]
    return max(ckpts, key=lambda p: int(p.stem[6:])) if ckpts else None


def copy_checkpoint(run_dir: pathlib.Path, out: pathlib.Path) -> str | None:
    """Copy the newest checkpoint of ``run_dir`` into ``out`` as parts of at most :data:`stage.PART_BYTES` (files
    come back from ``$OUT`` only up to 16 MiB each; a HoST-sized checkpoint is 22 MB) with ``checkpoint.json`` (sizes
    and SHA-256), replacing the older copy. ``stage.py join`` puts it back together here."""
    ckpt = newest_checkpoint(run_dir)
    if (
        ckpt is None
        or (out / "checkpoint.json").is_file()
        and json.loads((out / "checkpoint.json").read_text())["name"] == ckpt.name
    ):
        return None
    index = stage.write_parts(ckpt, out, stage.PART_BYTES, "checkpoint.json")  # new parts, then the index
    keep = {p["name"] for p in index["parts"]}
    for old in out.glob("model_*.pt.*"):
        if old.name not in keep:
            old.unlink()
    return ckpt.name


def run_training(a, out: pathlib.Path, deadline: float) -> dict:
    """``train.py task=standup sim.backend=warp`` until ``deadline``, the newest checkpoint copied into ``out``."""
    # The run lives outside the repository (``--run-root``, /tmp on the device), where it survives between calls to
    # the warm machine: a carried folder that a later call does not carry again is removed from the working tree.
    # A carried ``--resume`` checkpoint is copied in unless the run there is already further; a later call without
    # ``--resume`` continues the run it finds.
    run_dir = pathlib.Path(a.run_root) / "standup" / a.run_name
    if a.resume:
        src = pathlib.Path(a.resume)
        src_ckpt = newest_checkpoint(src) if src.is_dir() else (src if src.is_file() else None)
        if src_ckpt is None or not src_ckpt.stem[6:].isdigit():
            raise SystemExit(f"--resume {src}: no model_<it>.pt there; carry the folder stage.py join rebuilt")
        run_dir.mkdir(parents=True, exist_ok=True)
        here = newest_checkpoint(run_dir)
        if here is None or int(here.stem[6:]) < int(src_ckpt.stem[6:]):
            shutil.copy2(src_ckpt, run_dir / src_ckpt.name)
    fresh = [f"run.root={a.run_root}", f"run.name={a.run_name}"]
    where = [f"resume={run_dir}"] if newest_checkpoint(run_dir) else fresh
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        "task=standup",
        "sim.backend=warp",
        f"device={a.device}",
        f"env.num_envs={a.train_envs}",
        f"train.save_interval={a.save_interval}",
        *where,
        *a.train_args,
    ]
    log(out, f"\n## Training\n\n`{' '.join(cmd[1:])}`\n")
    t0 = time.time()
    with open(out / "train.log", "w") as logf:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=logf, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        next_copy = time.time() + a.ckpt_every_s
        while proc.poll() is None and time.time() < deadline:
            time.sleep(1.0)
            if time.time() >= next_copy:
                name = copy_checkpoint(run_dir, out)
                if name:
                    print(f"[{time.time() - t0:5.0f} s] copied {name} to {out}", flush=True)
                next_copy += a.ckpt_every_s
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # train.py saves a checkpoint, then exits
            try:
                proc.wait(timeout=a.term_grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    copy_checkpoint(run_dir, out)
    name = newest_checkpoint(run_dir).name if newest_checkpoint(run_dir) else None
    its = [ENV_STEPS.match(x) for x in (out / "train.log").read_text().splitlines()]
    its = [(int(m[1]), int(m[3].replace(",", ""))) for m in its if m]
    rates = sorted(r for _, r in its[1:]) or [0]  # the first iteration includes start-up
    summary = {
        "exit_code": proc.returncode,
        "wall_s": round(time.time() - t0, 1),
        "iterations_logged": len(its),
        "last_iteration": its[-1][0] if its else None,
        "median_env_steps_per_s": rates[len(rates) // 2],
        "checkpoint": name,
    }
    log(out, "training: " + json.dumps(summary))
    tail = (out / "train.log").read_text().splitlines()[-8:]
    log(out, "```\n" + "\n".join(tail) + "\n```")
    return summary


def save_warp_cache(out: pathlib.Path, limit_mib: float = 15.9) -> None:
    """Warp's kernel cache as ``warp_cache.tar.gz`` in ``out`` if it compresses under ``limit_mib``."""
    try:
        import warp as wp

        wp.init()
        cache = pathlib.Path(wp.config.kernel_cache_dir)
    except Exception as e:  # noqa: BLE001 - best effort: the next session compiles again
        print(f"no Warp kernel cache saved ({e})")
        return
    target = out / "warp_cache.tar.gz"
    with tarfile.open(target, "w:gz", compresslevel=9) as tar:
        tar.add(cache, arcname=cache.name)
    if target.stat().st_size > limit_mib * 2**20:
        print(f"Warp kernel cache is {target.stat().st_size / 2**20:.1f} MiB compressed: not kept")
        target.unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path(os.environ.get("OUT", "/tmp/upright_out")))
    p.add_argument("--deadline-s", type=float, default=560, help="seconds from start for everything (call: 600)")
    p.add_argument("--train-min-s", type=float, default=240, help="seconds kept for training")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--num-envs", type=int, nargs="+", default=[8192, 4096, 1024], help="in priority order")
    p.add_argument("--backends", nargs="+", default=["warp", "native", "mjx"], choices=["warp", "native", "mjx"])
    p.add_argument("--bench-seconds", type=float, default=3.0)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--vlm-args", default=None, help="run benchmarks/vlm_reward_cost.py with these arguments")
    p.add_argument("--vlm-max-s", type=float, default=180, help="time limit of the vlm_reward cost step")
    p.add_argument("--train-envs", type=int, default=8192, help="env.num_envs of the run (the default recipe's)")
    p.add_argument("--save-interval", type=int, default=5, help="train.save_interval (iterations)")
    p.add_argument("--ckpt-every-s", type=float, default=60)
    p.add_argument("--term-grace-s", type=float, default=40)
    p.add_argument("--resume", default=None, help="checkpoint (or its folder) returned by an earlier session")
    p.add_argument("--warp-cache", default=None, help="warp_cache.tar.gz returned by an earlier session")
    p.add_argument("--run-root", default="/tmp/upright_runs")
    p.add_argument("--run-name", default="gpu")
    p.add_argument("--train-args", nargs="*", default=[], help="more train.py overrides")
    p.add_argument("--rehearse", action="store_true", help="CPU, tiny sizes: check the steps here")
    p.add_argument("--_bench", help=argparse.SUPPRESS)
    p.add_argument("--_profile", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._bench:
        return bench_child(a._bench, a.bench_seconds, a.device)
    if a._profile:
        return profile_child(a._profile, a.device)
    start = time.time()
    deadline = start + a.deadline_s
    if a.rehearse:  # MJX is left out: its CPU compile alone takes minutes (its path here is the same subprocess)
        a.device, a.num_envs, a.train_envs, a.bench_seconds = "cpu", [8, 16], 16, 1.0
        a.backends = [b for b in a.backends if b != "mjx"]
        a.train_args = [*a.train_args, "train.num_steps_per_env=8", "sim.num_threads=1"]
    a.out.mkdir(parents=True, exist_ok=True)
    if a.warp_cache and pathlib.Path(a.warp_cache).is_file():
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        with tarfile.open(a.warp_cache) as tar:  # into ~/.cache/warp (the folder is named by Warp's version)
            tar.extractall(pathlib.Path.home() / ".cache" / "warp", **safe)
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    gpu = "none"
    if shutil.which(query[0]):
        gpu = subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip()
    log(
        out := a.out,
        f"# upright GPU session {time.strftime('%Y-%m-%d %H:%M')}\n\nGPU: {gpu}; CPU cores: "
        f"{os.cpu_count()}; Python {sys.version.split()[0]}; deadline {a.deadline_s:.0f} s\n\n## Benchmark\n",
    )
    if a.vlm_args is not None:
        run_vlm(a, out, deadline)
    results = run_bench(a, out, deadline)
    log(out, "\n" + bench_table(results) + "\n")
    if not a.no_profile and "warp" in a.backends and deadline - time.time() > a.train_min_s + 45:
        n = max(a.num_envs)
        limit = max(10, deadline - a.train_min_s - time.time())
        r = subprocess.run(
            [sys.executable, __file__, "--_profile", str(n), "--device", a.device],
            check=False,
            capture_output=True,
            text=True,
            timeout=limit,
        )
        lines = [x[8:] for x in r.stdout.splitlines() if x.startswith("PROFILE ")] or [r.stderr[-500:]]
        (out / "profile.txt").write_text("\n".join(lines) + "\n")
        log(out, "## Warp profile\n\n```\n" + "\n".join(lines[:12]) + "\n```")
    run_training(a, out, deadline)
    save_warp_cache(out)
    log(out, f"\nsession took {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
