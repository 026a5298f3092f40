"""End to end with a camera: `upright-deploy sim-robot --robot franka_emika_panda --camera front` renders the lift
scene's front camera from the simulated arm's current state and publishes it next to its pty link; the daemon
(`upright-deploy run --camera front=sim`) runs an exported TinyVLA that reads `observation.images.front`, and logs
the frames into its dataset. Midway, sim-robot's camera stalls (`--fault camera_stall:front:TICK`): the daemon must
hold the arm, flag CAMERA_STALE / STALE_ACTION, and damp with a one-line reason, without crashing.

One run (module fixture, ~25 s on the 2-core machine) serves both tests. The TinyVLA's weights are set by hand
(deploy_testlib.goal_seeking_tiny_vla with cameras): its actions drive the arm to GOAL and depend on the exact frame
by ~1e-3, so the test can tell which image the policy was given."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest
from daemon_testlib import offscreen_gl_available, render_lift_camera, start_daemon, start_sim_robot, stop
from deploy_testlib import goal_seeking_tiny_vla

from upright.dataset_io.lerobot import load_frames
from upright.dataset_io.records import SafetyFlag
from upright.robots import panda

OFFSET = np.array([0.5, -0.2, 0.3, 0.3, -0.3, -0.2, 0.4, -0.02])
GOAL = np.array(panda.HOME_CTRL) + OFFSET
SIZE = (64, 64)
STALL_TICK = 1150
"""I/O tick (2.3 s of simulated time at 500 Hz; POLICY starts at ~0.4 s) from which sim-robot's front camera
publishes nothing."""
MAX_FRAME_AGE_S = 0.5

pytestmark = [
    pytest.mark.slow,  # the whole module is end-to-end (pyproject.toml's markers)
    pytest.mark.skipif(not offscreen_gl_available(), reason="no offscreen OpenGL (MUJOCO_GL=egl/osmesa)"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from upright.tasks.lift.metadata import lift_deploy_contract
    from upright.vla.export import export_onnx

    tmp = tmp_path_factory.mktemp("camera_run")
    vla = tmp / "policy.onnx"
    model = goal_seeking_tiny_vla(GOAL, lift_deploy_contract(), cameras=("front",), image_size=SIZE)
    assert export_onnx(model, vla, ["lift the cube"]) < 1e-4
    t0 = time.monotonic()
    sim, links = start_sim_robot(
        tmp,
        "--robot",
        "franka_emika_panda",
        "--lockstep-dt",
        "0.002",
        "--record",
        str(tmp / "trace.npz"),
        "--camera",
        "front",
        "--camera-size",
        "64x64",
        "--fault",
        f"camera_stall:front:{STALL_TICK}",
        buses=1,
    )
    daemon = start_daemon(
        tmp,
        vla,
        links,
        "--robot",
        "franka_emika_panda",
        "--instruction",
        "lift the cube",
        "--camera",
        "front=sim",
        "--max-frame-age-s",
        str(MAX_FRAME_AGE_S),
        "--auto-start",
        "--ramp-s",
        "0.3",
        "--auto-engage",
        "0.1",
        "--exit-after-damping",
        "0.2",
    )
    try:
        code = daemon.wait(120)
    finally:
        stop(daemon)
        stop(sim)
    log = (tmp / "daemon.log").read_text()
    frames = load_frames(tmp / "dataset").to_pydict()
    ep = [i for i, e in enumerate(frames["episode_index"]) if e == 0]
    from upright.vla.dataset import load_dataset

    images = load_dataset(tmp / "dataset", cameras=("front",)).images["front"].numpy()  # (N, 3, H, W) uint8
    return SimpleNamespace(
        tmp=tmp,
        vla=vla,
        code=code,
        log=log,
        frames=frames,
        ep=ep,
        images=images[ep],
        trace=np.load(tmp / "trace.npz"),
        wall_s=time.monotonic() - t0,
    )


def _col(run, name):
    return np.array([run.frames[name][i] for i in run.ep])


def _qpos_at(run, t_us):
    times, qpos = run.trace["time"], run.trace["qpos"]
    return qpos[int(np.argmin(np.abs(times - t_us / 1e6)))]


def test_the_policy_reads_sim_camera_frames_of_the_driven_arm_and_they_are_logged(run):
    from upright.vla.onnx_policy import OnnxChunkPolicy

    assert run.code == 3, run.log[-3000:]  # exit after damping: the camera stall (next test)
    assert "cameras front=sim:" in run.log and "64x64 px, max frame age 0.5 s, logged" in run.log, run.log[-3000:]
    info = json.loads((run.tmp / "dataset" / "meta" / "info.json").read_text())
    assert info["features"]["observation.images.front"]["shape"] == [64, 64, 3]
    t_us, flags = _col(run, "imu_time_us"), _col(run, "safety_flags")
    source = _col(run, "control_source")
    pre = np.flatnonzero((t_us < STALL_TICK * 2000) & (source == 0))  # policy frames before the stall
    assert len(pre) > 80, len(pre)  # ~1.9 s of policy ticks
    imgs = run.images
    assert imgs.shape[1:] == (3, 64, 64) and imgs.dtype == np.uint8
    assert (imgs[pre].reshape(len(pre), -1).mean(1) > 10).all()  # a rendered scene, never a black placeholder
    assert not (flags[pre] & SafetyFlag.CAMERA_STALE).any(), flags[pre]
    fresh = (flags & SafetyFlag.STALE_ACTION) == 0
    assert fresh[pre][1:].mean() > 0.9, flags[pre]  # the queue (almost) never ran dry while the camera ran

    # the frames are renders of the simulated arm's own state: the first policy frame is pixel for pixel a render of a
    # recorded state of the 0.2 s (simulated) before its tick (a frame is captured before the tick that reads it), the
    # last one before the stall, with the arm at rest, a render of the state at its tick; and they differ (the arm
    # moved)
    first, last = pre[0], pre[-1]
    times, qpos = run.trace["time"], run.trace["qpos"]
    window = np.flatnonzero((times <= t_us[first] / 1e6) & (times > t_us[first] / 1e6 - 0.2))
    ref = render_lift_camera(run.tmp, np.concatenate([qpos[window], _qpos_at(run, t_us[last])[None]]), "front", SIZE)
    logged = imgs[[first, last]].transpose(0, 2, 3, 1).astype(float)
    err = np.array([np.abs(logged[0] - ref[:-1]).mean(axis=(1, 2, 3)).min(), np.abs(logged[1] - ref[-1]).mean()])
    moved = np.abs(logged[0] - logged[1]).mean()
    assert err.max() < 0.05 and moved > 1.0, (err, moved)

    # the policy was given those frames: each executed proposal is the ONNX policy's action for the logged state and
    # image of one of the last H ticks; with a gray image instead the actions differ
    state, proposal = _col(run, "observation.state"), _col(run, "observation.policy_action")
    policy = OnnxChunkPolicy(run.vla)
    n = last + 1
    batch = {"observation.state": state[:n], "observation.images.front": imgs[:n], "task": ["lift the cube"] * n}
    chunks = policy.predict_action_chunk(batch).numpy()
    gray = policy.predict_action_chunk({**batch, "observation.images.front": np.full_like(imgs[:n], 128)}).numpy()
    assert np.abs(chunks - gray).max() > 1e-3
    used = [t for t in pre[1:] if fresh[t]]
    # the runner drops a chunk's actions of ticks already executed and discards one that arrives H or more ticks after
    # its request (ChunkRunner._take), so tick t executes action t - s of a chunk requested at one of t-H+1..t
    h = policy.chunk_size
    match = [
        any(np.allclose(proposal[t], chunks[s, t - s], atol=1e-5) for s in range(max(0, t - h + 1), t + 1))
        for t in used
    ]
    assert np.mean(match) > 0.9, np.mean(match)

    # the actions were executed: the simulated arm settled at the policy's goal (the image term moves the equilibrium
    # by its value / 2: ~1.5 mrad, mm for the finger)
    end = _qpos_at(run, t_us[last])[:8]
    np.testing.assert_allclose(end[:7], GOAL[:7], atol=0.01)
    assert abs(end[7] - GOAL[7]) < 0.003
    print(
        f"camera run: {run.wall_s:.1f} s, {len(run.ep)} frames, render error {err}, moved {moved:.1f}, "
        f"matched {np.mean(match):.3f}, finger {end[7] - GOAL[7]:+.4f} m"
    )


def test_a_stalled_camera_holds_the_arm_flags_and_damps_without_a_crash(run):
    assert run.code == 3, run.log[-3000:]
    assert "Traceback" not in run.log, run.log[-3000:]
    exit_line = [line for line in run.log.splitlines() if "upright-deploy: exit" in line][-1]
    assert (
        "DAMPING: chunked policy: no fresh action for 25 policy ticks in a row (queue empty: camera front: frame"
        in exit_line
        and "max_frame_age_s 0.5 s" in exit_line
    ), exit_line
    t_us, flags = _col(run, "imu_time_us"), _col(run, "safety_flags")
    target, source = _col(run, "action.joint_target"), _col(run, "control_source")
    post = np.flatnonzero(t_us >= STALL_TICK * 2000)
    assert len(post) >= 25, len(post)
    assert not (flags & (SafetyFlag.EXCEPTION | SafetyFlag.NONFINITE_ACTION)).any()
    stale_cam = np.flatnonzero(flags & SafetyFlag.CAMERA_STALE)
    stale_act = np.flatnonzero(flags & SafetyFlag.STALE_ACTION)
    assert len(stale_cam) and stale_cam[0] >= post[0], (stale_cam, post[0])
    # from then on the logged image never changes (the newest frame is the last one published before the stall)
    imgs = run.images[stale_cam[0] :]
    assert (imgs == imgs[0]).all()
    # the queued actions ran out after CAMERA_STALE began; then the targets were held, 24 ticks, then damping
    held = [t for t in stale_act if t > stale_cam[0] and source[t] == 0]
    assert len(held) >= 24, held
    np.testing.assert_array_equal(target[held], np.tile(target[held[0]], (len(held), 1)))
    assert flags[-1] & SafetyFlag.STALE_FAULT and source[-1] == 3  # the fault's frame, damping
    episodes = pq.read_table(run.tmp / "dataset" / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert episodes[0]["upright/outcome"] == "damping" and "camera front" in episodes[0]["upright/reason"]
    # the arm stayed where the policy had put it
    np.testing.assert_allclose(_qpos_at(run, t_us[post[-1]])[:7], GOAL[:7], atol=0.02)
