"""LeRobot v3 output of the logger process, and its crash safety (SIGKILL: every flushed frame reads back)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from upright.dataset_io.lerobot import LeRobotV3Writer, load_frames, read_journal
from upright.dataset_io.records import frame_features
from upright.deploy.logger_client import LoggerClient
from upright.deploy.logger_records import record_dtype

JOINTS = ("a", "b", "c")
FEATURES = frame_features(JOINTS, [f"o{i}" for i in range(16)])


def fill(client: LoggerClient, episode: int, i: int, source: int = 0, done: bool = False) -> None:
    r = client.record
    r["kind"], r["episode"], r["frame_index"] = 0, episode, i
    r["observation.state"] = np.arange(12, dtype=np.float32) + i
    r["observation.policy_obs"] = i * 0.5
    r["observation.policy_action"] = -i
    r["action"] = i
    r["action.joint_target"] = 0.1 * i
    r["intervention"] = source == 1
    r["control_source"] = source
    r["safety_flags"] = i % 3
    r["t_mono_ns"] = 1_000_000 * i
    r["imu_time_us"] = 20_000 * i
    r["loop_lateness_us"] = 1.5
    r["next.reward"] = 1.0 if done else 0.0
    r["next.done"] = done


def check_frame(row: dict, i: int) -> None:
    assert row["frame_index"] == i
    np.testing.assert_array_equal(row["observation.state"], np.arange(12) + i)
    assert row["action"] == [float(i)] * 3 and row["t_mono_ns"] == 1_000_000 * i and row["safety_flags"] == i % 3


def test_record_fits_an_atomic_pipe_write():
    assert record_dtype(FEATURES).itemsize < 4096
    g1 = frame_features(tuple(f"j{i}" for i in range(23)), [f"o{i}" for i in range(76)])
    assert record_dtype(g1).itemsize < 4096


def test_episodes_written_as_lerobot_v3(tmp_path):
    client = LoggerClient(tmp_path / "ds", FEATURES, fps=50, robot_type="small", task="stand up", flush_every=4)
    for i in range(10):
        fill(client, 0, i, source=1 if 3 <= i < 6 else 0, done=i == 9)
        assert client.send()
    client.end_episode(0, "success")
    for i in range(5):
        fill(client, 1, i)
        client.send()
    assert client.close() == 0

    root = tmp_path / "ds"
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 50 and info["robot_type"] == "small"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (2, 15, 1)
    assert info["splits"] == {"train": "0:2"} and info["data_path"].startswith("data/chunk-")
    for key in (
        "observation.state",
        "action",
        "observation.policy_action",
        "intervention",
        "control_source",
        "safety_flags",
        "t_mono_ns",
        "next.reward",
        "next.done",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    ):
        assert key in info["features"], key
    assert info["upright"]["control_source_codes"]["human"] == 1
    frames = load_frames(root)
    assert frames.num_rows == 15 and frames.column("index").to_pylist() == list(range(15))
    assert frames.schema.field("observation.state").type == pa.list_(pa.float32(), 12)
    assert frames.schema.field("intervention").type == pa.bool_()
    rows = frames.to_pylist()
    for i in range(10):
        check_frame(rows[i], i)
        assert rows[i]["timestamp"] == pytest.approx(i / 50) and rows[i]["episode_index"] == 0
    assert [r["intervention"] for r in rows[:10]] == [3 <= i < 6 for i in range(10)]
    assert rows[9]["next.done"] and rows[9]["next.reward"] == 1.0
    episodes = pq.read_table(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert [(e["episode_index"], e["length"], e["dataset_from_index"], e["dataset_to_index"]) for e in episodes] == [
        (0, 10, 0, 10),
        (1, 5, 10, 15),
    ]
    assert [e["upright/outcome"] for e in episodes] == ["success", "stopped"] and episodes[0]["tasks"] == ["stand up"]
    assert episodes[0]["stats/action/max"] == [9.0] * 3
    stats = json.loads((root / "meta" / "stats.json").read_text())
    assert stats["action"]["max"] == [9.0] * 3 and stats["action"]["count"] == [15]
    tasks = pq.read_table(root / "meta" / "tasks.parquet").to_pylist()
    assert tasks == [{"task_index": 0, "task": "stand up"}]
    assert not list((root / "journal").glob("*.arrows"))


def test_sigkill_keeps_every_flushed_frame(tmp_path):
    """SIGKILL the logger mid-episode: every frame it reported flushed reads back valid, then becomes an episode."""
    root = tmp_path / "ds"
    client = LoggerClient(root, FEATURES, fps=50, robot_type="small", task="t", flush_every=5, flush_interval_s=0.05)
    progress = root / "journal" / "progress.json"
    i = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        fill(client, 0, i)
        client.send()
        i += 1
        time.sleep(0.002)
        if i % 20 == 0 and progress.exists() and json.loads(progress.read_text())["frames_flushed"] >= 60:
            break
    flushed = json.loads(progress.read_text())["frames_flushed"]
    os.kill(client.proc.pid, signal.SIGKILL)
    client.proc.wait(10)
    assert flushed >= 60

    journal = root / "journal" / "episode_000000.arrows"
    with open(journal, "ab") as f:  # a batch cut in half by the crash
        f.write(b"\xff\xff\xff\xff\x10\x00\x00\x00garbage")
    table = read_journal(journal)
    assert flushed <= table.num_rows <= i
    for k, row in enumerate(table.to_pylist()):
        check_frame(row, k)

    # the next logger (or `upright-deploy recover`) turns the journal into an episode
    proc = subprocess.run(
        [sys.executable, "-m", "upright.deploy.cli", "recover", str(root)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"recovered_episodes": [0], "total_episodes": 1, "quarantined": []}
    frames = load_frames(root).to_pylist()
    assert len(frames) == table.num_rows
    for k, row in enumerate(frames):
        check_frame(row, k)
    episodes = pq.read_table(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    assert episodes.column("upright/outcome").to_pylist() == ["interrupted"]


def test_existing_dataset_is_extended_not_overwritten(tmp_path):
    root = tmp_path / "ds"
    w = LeRobotV3Writer(root, FEATURES, 50, "small")
    cols = {
        name: np.zeros(
            (3, *f["shape"]) if f["shape"] != [1] else 3,
            dtype={"float32": np.float32, "int64": np.int64, "bool": bool}[f["dtype"]],
        )
        for name, f in FEATURES.items()
    }
    from upright.dataset_io.lerobot import column

    table = pa.table({**{n: column(v, FEATURES[n]) for n, v in cols.items()}, "frame_index": pa.array([0, 1, 2])})
    w.add_episode(0, table, "t", "success")
    w2 = LeRobotV3Writer(root, FEATURES, 50, "small")
    assert w2.next_episode_index == 1
    w2.add_episode(1, table, "t2", "failure")
    info = json.loads((root / "meta" / "info.json").read_text())
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (2, 6, 2)
    with pytest.raises(ValueError, match="other features"):
        LeRobotV3Writer(root, {**FEATURES, "extra": {"dtype": "float32", "shape": [2], "names": None}}, 50, "small")
