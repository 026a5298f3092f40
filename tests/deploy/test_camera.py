"""Camera sources of the daemon (upright/deploy/camera.py, upright/deploy/shared_frames.py) and their use by the
chunk runner, the
logger and the CLI, without sim-robot (test_camera_sim2sim.py runs the whole chain): the shared-frames file's
seqlocked slots, SimCamera's latest-frame semantics, size and restart handling on a file written by a real
SharedFrames writer (the producer sim-robot uses), the OpenCV camera's missing-dependency error and argument
checks, the runner's batch with observation.images.<name>, its stale- and corrupt-frame handling, images in the
logger's dataset, and the CLI's one-line refusals (a camera of the policy without --camera first)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from deploy_testlib import goal_seeking_tiny_vla

from upright.deploy.camera import (
    CameraError,
    CameraSource,
    OpenCVCamera,
    SimCamera,
    channel_path,
    parse_camera_args,
    parse_size,
)
from upright.deploy.chunk_runner import ChunkRunner
from upright.deploy.policy import PolicyFault
from upright.deploy.shared_frames import SharedFrames, SharedFramesError
from upright.vla.policy import ChunkPolicy

H, W = 16, 24


def frame(value: int) -> np.ndarray:
    img = np.full((H, W, 3), value, np.uint8)
    img[0, 0] = (value + 1) % 256, 7, 9  # not uniform: catches a wrong transpose
    return img


@pytest.fixture
def producer(tmp_path):
    """A real writer of sim-robot's frame file for camera ``front``; ``put(value)`` publishes frame(value) now."""
    files = SharedFrames.create(channel_path(tmp_path, "front"), {"front": (H, W)})
    state = {"stamp": 0}

    def put(value: int, age_s: float = 0.0) -> None:
        state["stamp"] += 1
        files.write(state["stamp"], {"front": frame(value)}, time.monotonic_ns() - int(age_s * 1e9), aux=state["stamp"])

    put.files = files
    yield put
    files.close(unlink=True)


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# ------------------------------------------------------------------ shared frames
def test_shared_frames_slots_round_trip_and_detect_overwritten_slots(tmp_path):
    w = SharedFrames.create(tmp_path / "ring.frames", {"a": (H, W), "b": (4, 5)}, slots=3)
    r = SharedFrames.open(tmp_path / "ring.frames")
    assert r.names == ("a", "b") and r.shapes == {"a": (H, W), "b": (4, 5)} and r.slots == 3
    assert r.read() is None and r.newest == 0  # nothing written yet
    w.write(1, {"a": frame(10)}, t_ns=123, aux=7)  # "b" missing: black
    stamp, imgs, t_ns, aux = r.read(1)
    assert (stamp, t_ns, aux) == (1, 123, 7) and r.newest == 1
    np.testing.assert_array_equal(imgs["a"], frame(10))
    assert not imgs["b"].any()
    for s in range(2, 5):
        w.write(s, {"a": frame(s), "b": np.ones((4, 5, 3), np.uint8)}, t_ns=s)
    assert r.read(1) is None  # stamp 4 overwrote slot 1: the old frame is gone, never a mix
    np.testing.assert_array_equal(r.read(4)[1]["a"], frame(4))
    with pytest.raises(ValueError, match=r"camera a: image of shape \(2, 2, 3\)"):
        w.write(5, {"a": np.zeros((2, 2, 3), np.uint8)}, t_ns=5)
    assert r.read(5) is None and r.read(4) is not None
    with pytest.raises(ValueError, match="read-only"):
        r.write(6, {}, t_ns=6)
    (tmp_path / "junk").write_bytes(b"x" * 100)
    with pytest.raises(SharedFramesError, match="not a shared-frames file"):
        SharedFrames.open(tmp_path / "junk")
    r.close()
    w.close(unlink=True)
    assert not (tmp_path / "ring.frames").exists()


# ------------------------------------------------------------------ SimCamera
def test_sim_camera_keeps_the_newest_frame_with_its_capture_time(tmp_path, producer):
    cam = SimCamera(tmp_path, "front", H, W)
    try:
        assert cam.read() == (None, -np.inf) and cam.shape == (H, W, 3)
        with pytest.raises(CameraError, match=r"camera front \(sim:.*\) gave no frame within 0.05 s") as err:
            cam.wait_frame(0.05)
        assert "\n" not in str(err.value)
        for v in (1, 2, 3):  # three frames before the reader looks: it keeps only the newest
            producer(v, age_s=0.05)
        img, t = cam.wait_frame(2.0)
        wait_for(lambda: cam.read()[0][1, 1, 0] == 3)
        img, t = cam.read()
        np.testing.assert_array_equal(img, frame(3))
        assert img.dtype == np.uint8 and img.flags.c_contiguous
        assert 0.05 <= time.monotonic() - t < 1.0  # the capture time, not the read time
        producer(4)
        wait_for(lambda: cam.read()[0][1, 1, 0] == 4)
        np.testing.assert_array_equal(img, frame(3))  # a frame handed out is never written again
        assert cam.sim_time_s == 4e-9 and cam.error is None
    finally:
        cam.close()
    cam.close()  # idempotent


def test_sim_camera_refuses_a_missing_file_or_another_size_in_one_line(tmp_path, producer):
    with pytest.raises(
        CameraError,
        match="no sim-robot camera at .*camera_wrist.frames; start sim-robot with --camera wrist --link-dir",
    ) as err:
        SimCamera(tmp_path, "wrist", H, W)
    assert "\n" not in str(err.value)
    with pytest.raises(
        CameraError,
        match=f"sim-robot renders {H}x{W} px, the policy reads 32x32: restart sim-robot with --camera-size 32x32",
    ):
        SimCamera(tmp_path, "front", 32, 32)


def test_sim_camera_picks_up_a_restarted_sim_robot(tmp_path, producer):
    cam = SimCamera(tmp_path, "front", H, W)
    try:
        producer(5)
        cam.wait_frame(2.0)
        producer.files.mark_closed()  # sim-robot exits: said in one line
        wait_for(lambda: cam.error == f"sim-robot closed camera front ({channel_path(tmp_path, 'front')})", 3.0)
        again = SharedFrames.create(channel_path(tmp_path, "front"), {"front": (H, W)})  # a new sim-robot
        again.write(1, {"front": frame(9)}, time.monotonic_ns())
        wait_for(lambda: cam.read()[0][1, 1, 0] == 9, 5.0)
        assert cam.error is None
        again.close()
    finally:
        cam.close()


# ------------------------------------------------------------------ OpenCV camera and arguments
def test_an_opencv_camera_without_opencv_names_the_package():
    code = (
        "import sys; sys.modules['cv2'] = None\n"  # OpenCV not importable, whether or not it is installed
        "from upright.deploy.camera import OpenCVCamera, CameraError\n"
        "try:\n    OpenCVCamera('/dev/video0', 'wrist', 64, 64)\nexcept CameraError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "camera wrist=/dev/video0 needs OpenCV: pip install opencv-python-headless", out


@pytest.mark.parametrize(
    ("device", "match"),
    [
        ("video0", "expected /dev/videoN, a V4L2 index N, or a URL"),
        ("-1", "expected /dev/videoN"),
        ("", "expected /dev/videoN"),
    ],
)
def test_an_opencv_camera_checks_its_device_argument_first(device, match):
    with pytest.raises(CameraError, match=match):
        OpenCVCamera(device, "wrist", 64, 64)
    with pytest.raises(CameraError, match="index must be >= 0"):
        OpenCVCamera(-2, "wrist", 64, 64)


def test_camera_arguments_parse_or_fail_in_one_line():
    assert parse_camera_args(["front=sim", "wrist = /dev/video0"]) == {"front": "sim", "wrist": "/dev/video0"}
    assert parse_size("64x96") == (64, 96)
    for bad, match in (("front", "NAME=SOURCE"), ("=sim", "NAME=SOURCE"), ("front=", "NAME=SOURCE")):
        with pytest.raises(CameraError, match=match):
            parse_camera_args([bad])
    with pytest.raises(CameraError, match="given twice"):
        parse_camera_args(["front=sim", "front=/dev/video0"])
    with pytest.raises(CameraError, match="expected HxW"):
        parse_size("64")


# ------------------------------------------------------------------ the runner
class ImagePolicy(ChunkPolicy):
    """Records each batch; its chunk is the image's mean (so an action says which frame it came from)."""

    action_convention = "delta"
    chunk_size, action_dim = 4, 2

    def __init__(self):
        self.batches: list[dict] = []

    def predict_action_chunk(self, batch):
        self.batches.append(batch)
        img = batch["observation.images.front"]
        return torch.full((1, self.chunk_size, self.action_dim), float(img[0, :, 1:, 1:].float().mean()))


def test_the_runner_feeds_the_newest_frame_and_skips_stale_or_missing_ones(tmp_path, producer):
    cam = SimCamera(tmp_path, "front", H, W)
    policy = ImagePolicy()
    r = ChunkRunner(policy, "lift", control_dt=0.02, cameras={"front": cam}, max_frame_age_s=0.3, prefetch_below=1)
    try:
        obs = np.zeros((1, 3), np.float32)
        assert r(obs) is None and r.camera_stale and r.stats.requests == 0  # no frame yet: nothing requested
        assert "camera front: no frame yet (max_frame_age_s 0.3 s)" in r.miss_reason
        producer(40)
        wait_for(lambda: cam.read()[0] is not None)
        assert r(obs) is None and not r.camera_stale and r.stats.requests == 1
        wait_for(lambda: len(policy.batches) == 1)
        img = policy.batches[0]["observation.images.front"]
        assert img.shape == (1, 3, H, W) and img.dtype == torch.uint8
        np.testing.assert_array_equal(img[0].permute(1, 2, 0).numpy(), frame(40))
        assert policy.batches[0]["task"] == ["lift"] and policy.batches[0]["observation.state"].shape == (1, 3)
        time.sleep(0.05)
        assert r(obs)[0] == 40.0  # the chunk of that frame
        producer(50, age_s=1.0)  # a frame captured 1 s ago: too old to infer from
        wait_for(lambda: cam.read()[0][1, 1, 0] == 50)
        served = [None if a is None else float(a[0]) for a in (r(obs) for _ in range(6))]
        # the queue (predicted from frame 40) still runs, no new chunk is requested, then the ticks get nothing
        assert served[0] == 40.0 and served[-3:] == [None] * 3 and set(served) == {40.0, None}, served
        assert served == sorted(served, key=lambda v: v is None), served
        assert r.camera_stale and r.stats.frames_stale >= 1 and len(policy.batches) == 1
        assert "queue empty: camera front: frame 1.0" in r.miss_reason and "\n" not in r.miss_reason
        producer(60)  # the camera recovers: requests resume
        wait_for(lambda: cam.read()[0][1, 1, 0] == 60)
        assert r(obs) is None and not r.camera_stale
        wait_for(lambda: len(policy.batches) == 2)
        time.sleep(0.05)
        assert r(obs)[0] == 60.0
        # a corrupt frame (another shape than the source's) is a one-line fault, not a crash
        cam._latest = (np.zeros((H, W), np.float32), time.monotonic())
        r.reset()
        with pytest.raises(
            PolicyFault,
            match=rf"camera front gave a corrupt frame: \({H}, {W}\) float32, expected "
            rf"\({H}, {W}, 3\) uint8$",
        ):
            r(obs)
    finally:
        r.close()
        cam.close()


class EveryReadNewCamera(CameraSource):
    """A camera whose newest frame changes between any two reads (a frame arriving in the middle of a tick, as on a
    loaded machine); no thread."""

    def __init__(self):
        super().__init__("front", H, W, "every-read-new")
        self.reads = 0

    def read(self):
        self.reads += 1
        return frame(self.reads), time.monotonic()


def test_the_frame_a_chunk_request_gets_is_the_tick_image_the_controller_logs():
    # the controller logs runner.tick_images (controller_recording.py): a frame published after the runner read the
    # camera, within the same tick, must neither reach the dataset nor change what the policy was given
    cam, policy = EveryReadNewCamera(), ImagePolicy()
    r = ChunkRunner(policy, "lift", control_dt=0.02, cameras={"front": cam}, max_frame_age_s=0.3, prefetch_below=1)
    try:
        obs = np.zeros((1, 3), np.float32)
        assert r(obs) is None and r.stats.requests == 1 and cam.reads == 1  # one read per tick
        seen = r.tick_images["front"]
        assert cam.read()[0][1, 1, 0] != seen[1, 1, 0]  # the camera has moved on since
        wait_for(lambda: len(policy.batches) == 1)
        np.testing.assert_array_equal(policy.batches[0]["observation.images.front"][0].permute(1, 2, 0).numpy(), seen)
        time.sleep(0.05)
        assert r(obs)[0] == float(frame(1)[1:, 1:].mean()) and r.tick_images["front"][1, 1, 0] == 3  # no request
    finally:
        r.close()


# ------------------------------------------------------------------ logging
def test_the_logger_stores_camera_frames_as_png_images(tmp_path):
    from upright.dataset_io.lerobot import load_frames
    from upright.dataset_io.records import frame_features
    from upright.deploy.logger_client import LoggerClient
    from upright.vla.dataset import load_dataset

    features = frame_features(("a", "b"), ["o0"], {"front": (H, W)})
    assert features["observation.images.front"] == {
        "dtype": "image",
        "shape": [H, W, 3],
        "names": ["height", "width", "channel"],
    }
    client = LoggerClient(tmp_path / "ds", features, fps=50, robot_type="small", task="t", flush_every=2)
    assert not client.images.path.exists()  # the ring is unlinked once the logger has mapped it
    for i in range(5):
        r = client.record
        r["kind"], r["episode"], r["frame_index"] = 0, 0, i
        r["action"] = i
        if i != 3:  # frame 3 without an image: stored black
            client.put_images({"observation.images.front": frame(10 * i)})
        assert client.send()
    client.end_episode(0, "success")
    assert client.close() == 0
    rows = load_frames(tmp_path / "ds").to_pydict()
    assert [a[0] for a in rows["action"]] == [0, 1, 2, 3, 4]
    images = load_dataset(tmp_path / "ds", cameras=("front",)).images["front"].numpy()
    assert images.shape == (5, 3, H, W)
    for i in (0, 1, 2, 4):
        np.testing.assert_array_equal(images[i].transpose(1, 2, 0), frame(10 * i))
    assert not images[3].any()


# ------------------------------------------------------------------ the CLI
@pytest.fixture(scope="module")
def camera_vla(tmp_path_factory):
    from upright.tasks.lift.metadata import lift_deploy_contract

    folder = tmp_path_factory.mktemp("camera_vla")
    goal_seeking_tiny_vla(np.zeros(8), lift_deploy_contract(), cameras=("front",), image_size=(H, W)).save(
        folder / "model.pt"
    )
    return folder


def _refusal(capsys, *argv):
    from upright.deploy.cli import main

    assert main(["run", "--robot", "franka_emika_panda", "--no-log", "--no-keyboard", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("upright-deploy: refusing to start: "), err
    return err[0]


def test_the_cli_refuses_a_camera_policy_without_a_source_for_each_camera(tmp_path, capsys, camera_vla, linear_policy):
    common = ["--policy", str(camera_vla), "--instruction", "lift", "--socket", str(tmp_path / "ctl.sock")]
    msg = _refusal(capsys, *common)
    assert "reads cameras ['front']; no source for ['front']: add --camera front=sim" in msg
    assert "--camera front=/dev/videoN" in msg
    msg = _refusal(capsys, *common, "--camera", "front=sim", "--camera", "side=sim")
    assert "--camera side: " in msg and "does not read camera 'side'" in msg
    msg = _refusal(capsys, *common, "--camera", "front=sim")
    assert "--camera front=sim reads sim-robot's --link-dir: give --port-dir DIR" in msg
    msg = _refusal(capsys, *common, "--camera", f"front=sim:{tmp_path}")
    assert f"no sim-robot camera at {tmp_path}/camera_front.frames; start sim-robot with --camera front" in msg
    msg = _refusal(capsys, *common, "--camera", "front")
    assert "--camera expects NAME=SOURCE" in msg
    msg = _refusal(
        capsys,
        "--policy",
        str(linear_policy),
        "--robot",
        "unitree_g1_29dof",
        "--camera",
        "front=sim",
        "--socket",
        str(tmp_path / "ctl.sock"),
    )
    assert "--camera are for chunked (VLA) policies" in msg


def test_the_cli_starts_its_cameras_before_anything_moves_and_frees_them_on_a_refusal(tmp_path, capsys, camera_vla):
    """A camera that is there but gives no frame refuses the start (one line) after CAMERA_START_TIMEOUT_S; the
    sources' threads are gone afterwards."""
    import upright.deploy.cli_run as cli_run

    files = SharedFrames.create(channel_path(tmp_path, "front"), {"front": (H, W)})  # a sim-robot that never renders
    old = cli_run.CAMERA_START_TIMEOUT_S
    cli_run.CAMERA_START_TIMEOUT_S = 0.3
    try:
        msg = _refusal(
            capsys,
            "--policy",
            str(camera_vla),
            "--instruction",
            "lift",
            "--camera",
            f"front=sim:{tmp_path}",
            "--socket",
            str(tmp_path / "ctl.sock"),
        )
    finally:
        cli_run.CAMERA_START_TIMEOUT_S = old
        files.close(unlink=True)
    assert "camera front (sim:" in msg and "gave no frame within 0.3 s" in msg
    assert not [t for t in threading.enumerate() if t.name.startswith("upright-camera-")]
