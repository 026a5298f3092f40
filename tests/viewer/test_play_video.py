"""play.py's headless path end to end: an MP4 whose frames change (the robot moves), record= and replay=."""

from __future__ import annotations

import numpy as np
import pytest
from viewer_testlib import run_play

pytestmark = pytest.mark.slow  # the whole module is end-to-end (pyproject.toml's markers)

SMALL = ["task=standup", "recipe=host", "render.width=320", "render.height=240", "render.fps=25"]


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("video")
    proc = run_play([*SMALL, "policy=random", "video=out.mp4", "duration=2", "record=traj.npz"], cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return cwd, proc


def test_video_frames_change(random_run):
    from upright.viewer.video import frame_differences

    cwd, proc = random_run
    video = cwd / "out.mp4"
    assert video.is_file() and video.stat().st_size > 10_000, proc.stdout
    diffs = frame_differences(video)
    assert len(diffs) + 1 == 51  # 2 s at 25 fps, first frame included
    # the robot drops during the unactuated phase and then flails under random actions: frames keep changing
    assert np.mean(diffs) > 1.0, diffs
    assert np.mean(diffs[len(diffs) // 2 :]) > 1.0, diffs
    assert "Wrote" in proc.stdout and "video viewer" in proc.stdout


def test_record_writes_qpos_trajectory(random_run):
    from upright.viewer.trajectory import FORMAT, load_trajectory

    cwd, _ = random_run
    traj = load_trajectory(cwd / "traj.npz")
    assert traj.qpos.shape == (101, 36)  # reset frame + 100 control steps of 0.02 s
    assert traj.dt == pytest.approx(0.02)
    assert traj.task == "standup" and traj.model == "unitree_g1_29dof"
    assert len(traj.joint_names) == 30  # the free base joint + 29 hinges, in qpos order
    assert np.ptp(traj.qpos[:, 7:], axis=0).max() > 0.1  # joints moved
    assert traj.extras["reward_groups"].shape == (101, 4)
    assert str(np.load(cwd / "traj.npz")["format"]) == FORMAT


def test_replay_npz_to_video(random_run):
    cwd, _ = random_run
    proc = run_play([*SMALL, "replay=traj.npz", "video=replay.mp4"], cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    from upright.viewer.video import frame_differences

    diffs = frame_differences(cwd / "replay.mp4")
    assert len(diffs) + 1 == 51 and np.mean(diffs) > 1.0
