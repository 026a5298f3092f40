"""The video camera frames the robot (segmentation renders: the robot's pixels span 35-65 % of the frame height and
stay inside the frame; the Panda's cube and target are in view) and the strip shows the state's numbers."""

from __future__ import annotations

import math

import mujoco  # MUJOCO_GL: tests/conftest.py chose EGL or OSMesa before any import of MuJoCo
import numpy as np
import pytest
from viewer_testlib import run_play

W, H = 160, 120


def pixel_box(renderer: mujoco.Renderer, data: mujoco.MjData, cam, geoms) -> tuple[int, int, int, int] | None:
    """Rows and columns (first, last) of the pixels of ``geoms`` in a segmentation render; None when none shows."""
    renderer.enable_segmentation_rendering()
    try:
        renderer.update_scene(data, camera=cam)
        seg = renderer.render()
    finally:
        renderer.disable_segmentation_rendering()
    mask = (seg[..., 1] == mujoco.mjtObj.mjOBJ_GEOM) & np.isin(seg[..., 0], np.asarray(geoms))
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    return None if rows.size == 0 else (rows[0], rows[-1], cols[0], cols[-1])


def assert_framed(box, what: str, lo: float = 0.35, hi: float = 0.65) -> None:
    assert box is not None, f"{what}: not in the frame"
    r0, r1, c0, c1 = box
    share = (r1 - r0 + 1) / H
    assert lo <= share <= hi, f"{what}: spans {share:.0%} of the frame height (want {lo:.0%}-{hi:.0%})"
    assert r0 > 0 and r1 < H - 1 and c0 > 0 and c1 < W - 1, f"{what}: touches the frame's edge {box}"


def g1_states(env) -> dict[str, np.ndarray]:
    """qpos of a standing G1 (the default pose), one lying on its back, and the env's reset state."""
    model = env.model
    standing = model.qpos0.copy()
    standing[env._q_adr.numpy()] = env.default_pose.cpu().numpy()
    lying = standing.copy()
    lying[2] = 0.15
    lying[3:7] = [math.cos(-math.pi / 4), 0.0, math.sin(-math.pi / 4), 0.0]  # pitched back 90°: on its back
    return {"standing": standing, "lying": lying, "reset": env.sim.state.qpos[0].double().numpy()}


@pytest.fixture(scope="module")
def g1(standup_env):
    from upright.viewer.framing import task_camera

    model = standup_env.model
    renderer = mujoco.Renderer(model, H, W)
    camera = task_camera(model, 1, "standup", W / H)
    yield model, mujoco.MjData(model), renderer, camera, g1_states(standup_env)
    renderer.close()


@pytest.mark.parametrize("state", ["standing", "lying", "reset"])
def test_g1_camera_frames_the_robot(g1, state):
    model, data, renderer, camera, states = g1
    data.qpos[:] = states[state]
    mujoco.mj_forward(model, data)
    camera.reset()
    assert_framed(pixel_box(renderer, data, camera.update(data), camera.geoms), f"G1 {state}")


def test_g1_camera_tracks_the_torso(g1):
    model, data, renderer, camera, states = g1
    data.qpos[:] = states["lying"]
    mujoco.mj_forward(model, data)
    camera.reset()
    before = camera.update(data).lookat.copy()
    data.qpos[0] += 3.0  # the robot 3 m along x: the camera follows (smoothed over a few frames)
    mujoco.mj_forward(model, data)
    for _ in range(100):  # 4 s, ten smoothing time constants
        cam = camera.update(data, 0.04)
    np.testing.assert_allclose(cam.lookat - before, [3.0, 0.0, 0.0], atol=0.02)
    assert_framed(pixel_box(renderer, data, cam, camera.geoms), "G1 moved")


@pytest.fixture(scope="module")
def lift():
    from upright.tasks.lift.scene import lift_scene
    from upright.viewer.framing import task_camera

    model = lift_scene()
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, H, W)
    camera = task_camera(model, 0, "lift", W / H)
    cube_geom = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "box")
    target_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "mocap_target")
    target_geoms = np.flatnonzero(model.geom_bodyid == target_body)
    yield model, data, renderer, camera, [cube_geom], target_geoms
    renderer.close()


def _place(model, data, cube, target) -> None:
    adr = model.jnt_qposadr[model.body_jntadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "box")]]
    data.qpos[adr : adr + 3] = cube
    data.mocap_pos[0] = target
    mujoco.mj_forward(model, data)


CORNERS = [((x, y, 0.03), (tx, ty, tz)) for x, y in ((0.5, -0.2), (0.9, 0.2), (0.9, -0.2), (0.5, 0.2))
           for tx, ty, tz in ((0.9, 0.2, 0.43), (0.5, -0.2, 0.23), (0.5, 0.2, 0.43))]  # fmt: skip


def test_lift_camera_is_fixed_and_sees_arm_cube_and_target(lift):
    model, data, renderer, camera, cube, target = lift
    camera.reset()
    cam = camera.update(data)
    assert_framed(pixel_box(renderer, data, cam, camera.geoms), "Panda arm")
    lookat, distance = cam.lookat.copy(), cam.distance
    for start, goal in CORNERS:  # the ranges' corners: cube at its start, then at the target
        for cube_pos in (start, goal):
            _place(model, data, cube_pos, goal)
            cam = camera.update(data, 0.04)
            np.testing.assert_array_equal(cam.lookat, lookat)  # the view does not follow the cube
            assert cam.distance == distance
            # at the target the cube sits inside the marker (one hides the other): the pair must show
            shown = [("cube", cube), ("target", target)] if cube_pos != goal else [("cube at target", [*cube, *target])]
            for what, geoms in shown:
                box = pixel_box(renderer, data, cam, geoms)
                assert box is not None, f"{what} out of view: cube {cube_pos}, target {goal}"
                assert box[0] > 0 and box[1] < H - 1 and box[2] > 0 and box[3] < W - 1, (what, box)


def test_strip_lines_show_the_values():
    from upright.viewer.strip import StripValues, strip_lines

    v = StripValues(3.2, 2, {"head above feet": 1.234, "pelvis height": 0.7})
    assert strip_lines(v) == ("t  3.20 s   episode 2", "head above feet 1.23 m   pelvis height 0.70 m")
    assert strip_lines(StripValues(0.0, 1, {"cube height": math.nan}))[1] == "cube height -"


def test_strip_reads_the_state(g1, lift):
    from upright.viewer.strip import StripReader, draw_strip, strip_height

    model, data, _, _, states = g1
    reader = StripReader(model, "standup", 1)
    images, heads = [], []
    for state in ("standing", "lying"):
        data.qpos[:] = states[state]
        mujoco.mj_forward(model, data)
        v = reader.values(data, 1.0, 1)
        heads.append(v.quantities["head above feet"])
        assert v.quantities["pelvis height"] == pytest.approx(states[state][2])
        images.append(draw_strip(W, strip_height(H), v))
    assert heads[0] == pytest.approx(reader.standing_head, abs=0.05) and heads[0] > 1.0  # standing: ~1.28 m
    assert abs(heads[1]) < 0.3  # lying: head and feet at about one height
    assert images[0].shape == (strip_height(H), W, 3)
    assert np.abs(images[0].astype(int) - images[1]).sum() > 0  # the strip shows the difference

    model, data, *_ = lift
    _place(model, data, (0.7, 0.0, 0.2), (0.7, 0.1, 0.33))
    v = StripReader(model, "lift", 1).values(data, 0.5, 1)
    assert v.quantities == pytest.approx({"cube height": 0.2, "target height": 0.33})
    assert (v.bar, v.bar_ref) == pytest.approx((0.2, 0.33))


def test_play_writes_a_poster(tmp_path):
    import imageio.v2 as imageio

    from upright.viewer.strip import strip_height

    args = ["task=lift", "policy=zero", "duration=0.5", f"render.width={W}", f"render.height={H}"]
    proc = run_play([*args, "video=poster.png"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    img = imageio.imread(tmp_path / "poster.png")
    assert img.shape[:2] == (H + strip_height(H), 4 * W + 3 * 4)  # 4 frames, 4 px gaps, the strip under each
    proc = run_play([*args, "video=out.avi"], tmp_path)
    assert proc.returncode == 2 and ".mp4, .gif, .png" in proc.stderr


def test_strip_of_an_arm_without_a_cube_shows_its_gripper():
    from upright.tasks.reach.scene import reach_scene
    from upright.viewer.strip import StripReader

    model = reach_scene()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "gripper")
    v = StripReader(model, "reach", 0).values(data, 0.5, 1)
    assert list(v.quantities) == ["gripper height"] and v.bar == pytest.approx(data.site_xpos[site, 2])
