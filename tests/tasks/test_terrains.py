"""Standup terrains and postures (HoST spec §4, §7): geometry, start poses, passive phase, terminations,
evaluation success, config selection and errors, and one MJX-vs-native check on the wall.

Geometry is measured on the compiled ``MjModel`` (geom frames), not on the builder's constants.
Env tests use few envs, one thread.
"""

from __future__ import annotations

import csv
import math

import mujoco
import numpy as np
import pytest
import torch

from upright.robots import g1
from upright.tasks.standup import metrics
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.scene import standup_scene
from upright.tasks.standup.state import StandupState
from upright.tasks.standup.terminations import (
    GROUND_TERMINATION,
    PLATFORM_TERMINATION,
    SLOPE_TERMINATION,
    WALL_TERMINATION,
    terrain_fall,
    velocity_explosion,
)
from upright.tasks.standup.terrains import (
    TERRAINS,
    StartSampler,
    check_variant,
    standup_env_cfg,
    terrain_layout,
)

SIM = SimCfg(num_threads=1)


def _geom(m: mujoco.MjModel, name: str) -> int:
    gid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, name)
    assert gid >= 0, name
    return gid


def _geom_axes(m: mujoco.MjModel, gid: int) -> np.ndarray:
    """(3, 3) rotation of geom ``gid`` in the world (columns: its x, y, z axes)."""
    r = np.zeros(9)
    mujoco.mju_quat2Mat(r, m.geom_quat[gid])
    return r.reshape(3, 3)


def _exact_start(terrain: str, posture: str = "supine", num_envs: int = 4, **overrides) -> StandupEnvCfg:
    """The terrain's config with the reset pose unscattered and domain randomisation off (deterministic starts)."""
    cfg = standup_env_cfg(
        terrain,
        posture,
        num_envs=num_envs,
        obs_noise=False,
        init_joint_scale=(1.0, 1.0),
        init_joint_offset=(0.0, 0.0),
        **overrides,
    )
    if hasattr(cfg, "domain_rand"):
        import dataclasses

        cfg = dataclasses.replace(cfg, domain_rand=dataclasses.replace(cfg.domain_rand, enabled=False))
    return cfg


def _run_passive(env: StandupEnv) -> None:
    zero = torch.zeros(env.num_envs, env.num_actions)
    for _ in range(env.cfg.unactuated_steps):
        env.step(zero)


def _contacts(env: StandupEnv, i: int) -> list[tuple[str, str]]:
    """(geom, geom) name pairs in contact in env ``i``'s current state (collision detection on its qpos)."""
    m = env.model
    d = mujoco.MjData(m)
    d.qpos[:] = env.sim.state.qpos[i].double().cpu().numpy()
    mujoco.mj_forward(m, d)
    name = lambda g: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)  # noqa: E731
    return [(name(c.geom1), name(c.geom2)) for c in d.contact[: d.ncon]]


# ------------------------------------------------------------------ geometry
def test_platform_sub_terrain_heights_span_host_range():
    m = standup_scene(terrain="platform")
    layout = terrain_layout("platform")
    tops = []
    for sub in layout.sub_terrains:
        gid = _geom(m, sub.geoms[0])
        assert m.geom_type[gid] == mujoco.mjtGeom.mjGEOM_BOX
        np.testing.assert_allclose(_geom_axes(m, gid), np.eye(3), atol=1e-9)  # flat box
        top = m.geom_pos[gid, 2] + m.geom_size[gid, 2]
        bottom = m.geom_pos[gid, 2] - m.geom_size[gid, 2]
        assert bottom == pytest.approx(0.0, abs=1e-9)  # stands on the ground
        edge_x = m.geom_pos[gid, 0] + m.geom_size[gid, 0]
        assert edge_x == pytest.approx(sub.anchor[0], abs=1e-9)  # the anchor is the +x edge
        assert top == pytest.approx(sub.height, abs=1e-9)
        tops.append(top)
    assert min(tops) == pytest.approx(0.22, abs=1e-6) and max(tops) == pytest.approx(0.46, abs=1e-6)
    assert all(0.22 - 1e-6 <= t <= 0.46 + 1e-6 for t in tops) and len(set(np.round(tops, 6))) == len(tops)


@pytest.mark.parametrize(("terrain", "lo_deg", "hi_deg"), [("wall", 14.0, 84.3), ("slope", 1.1, 14.6)])
def test_ramp_angles_measured_from_geom_frames(terrain, lo_deg, hi_deg):
    m = standup_scene(terrain=terrain)
    angles = []
    for sub in terrain_layout(terrain).sub_terrains:
        gid = _geom(m, sub.geoms[0])
        axes = _geom_axes(m, gid)
        normal = axes[:, 2]  # the slab's top face normal
        angle = math.degrees(math.acos(normal[2]))
        assert normal[0] > 0 and abs(normal[1]) < 1e-9  # the incline faces +x: it rises toward -x
        # the top face's downhill edge is the ramp foot: on the ground at the anchor
        foot = m.geom_pos[gid] + axes @ np.array([m.geom_size[gid, 0], 0.0, m.geom_size[gid, 2]])
        np.testing.assert_allclose(foot[[0, 2]], [sub.anchor[0], 0.0], atol=1e-9)
        uphill = m.geom_pos[gid] + axes @ np.array([-m.geom_size[gid, 0], 0.0, m.geom_size[gid, 2]])
        assert uphill[2] <= 1.0 + 1e-9  # HoST caps ramps at 1.0 m
        if len(sub.geoms) > 1:  # capped: a flat plateau continues at the cap height
            pid = _geom(m, sub.geoms[1])
            assert m.geom_pos[pid, 2] + m.geom_size[pid, 2] == pytest.approx(1.0)
            assert uphill[2] == pytest.approx(1.0)
        angles.append(angle)
    assert min(angles) == pytest.approx(lo_deg, abs=0.1) and max(angles) == pytest.approx(hi_deg, abs=0.1)
    assert angles == sorted(angles) and len(angles) == len(set(np.round(angles, 3)))


@pytest.mark.parametrize("terrain", ["platform", "wall", "slope"])
def test_terrain_geoms_keep_the_contact_filter(terrain):
    m = standup_scene(terrain=terrain)
    ground = standup_scene()
    boxes = [_geom(m, g) for s in terrain_layout(terrain).sub_terrains for g in s.geoms]
    for gid in boxes:
        assert (m.geom_contype[gid], m.geom_conaffinity[gid]) == (g1.TERRAIN_CONTYPE, g1.TERRAIN_CONAFFINITY)
        assert m.geom_bodyid[gid] == 0  # static, in the world body
    robot = [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and m.geom_contype[g]]
    assert {(m.geom_contype[g], m.geom_conaffinity[g]) for g in robot} == {(g1.ROBOT_CONTYPE, g1.ROBOT_CONAFFINITY)}
    assert m.npair == ground.npair  # self-collision pairs unchanged
    # MJX's cull keeps max_geom_pairs per collision group: enough for every robot geom x its sub-terrain's boxes
    limit = m.numeric_data[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_NUMERIC, "max_geom_pairs")]
    per_sub = max(len(s.geoms) for s in terrain_layout(terrain).sub_terrains)
    assert limit >= per_sub * len(robot) and limit >= m.npair
    assert ground.nnumeric == 0  # the ground scene is unchanged


@pytest.mark.parametrize("terrain", ["platform", "wall", "slope"])
def test_mjx_bounding_sphere_cull_keeps_every_pair_with_the_own_sub_terrain(terrain):
    """Replays MJX's ``max_geom_pairs`` cull (top-k of |p1 - p2| - (r1 + r2) per geom-type group) on settled states."""
    env = StandupEnv(standup_env_cfg(terrain, num_envs=6), SIM, seed=2)
    _run_passive(env)
    m = env.model
    k = int(m.numeric_data[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_NUMERIC, "max_geom_pairs")])
    layout = env.terrain_layout
    boxes = [_geom(m, g) for s in layout.sub_terrains for g in s.geoms]
    robot = [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and m.geom_contype[g]]
    d = mujoco.MjData(m)
    for i in range(env.num_envs):
        d.qpos[:] = env.sim.state.qpos[i].double().numpy()
        mujoco.mj_forward(m, d)
        own = {_geom(m, g) for g in layout.sub_terrains[int(env.sub_terrain[i])].geoms}
        for gtype in {int(m.geom_type[g]) for g in robot}:
            pairs = [(r, b) for r in robot if m.geom_type[r] == gtype for b in boxes]
            dist = np.array(
                [
                    np.linalg.norm(d.geom_xpos[r] - d.geom_xpos[b]) - m.geom_rbound[r] - m.geom_rbound[b]
                    for r, b in pairs
                ]
            )
            kept = {pairs[j] for j in np.argsort(dist, kind="stable")[:k]} if len(pairs) > k else set(pairs)
            assert {(r, b) for r, b in pairs if b in own} <= kept


# ------------------------------------------------------------------ starts
def test_sub_terrains_are_drawn_uniformly_at_reset():
    layout = terrain_layout("slope")
    sampler = StartSampler(layout, TERRAINS["slope"], "supine", 0.8)
    idx, pos, quat = sampler.sample(11000, torch.Generator().manual_seed(0))
    counts = torch.bincount(idx, minlength=len(layout.sub_terrains)).float()
    assert counts.min() > 0.8 * 1000 and counts.max() < 1.2 * 1000
    run = torch.tensor([s.anchor[0] for s in layout.sub_terrains])[idx] - pos[:, 0]
    assert run.min() >= 1.5 and run.max() <= 2.5  # 1.5-2.5 m up the ramp
    grad = torch.tensor([s.gradient for s in layout.sub_terrains])[idx]
    torch.testing.assert_close(pos[:, 2], run * grad + 0.8)  # 0.8 m above the ramp surface
    y = torch.tensor([s.anchor[1] for s in layout.sub_terrains])[idx]
    torch.testing.assert_close(pos[:, 1], y)


def test_platform_robot_starts_on_top_near_the_edge_and_stays_there():
    env = StandupEnv(standup_env_cfg("platform", num_envs=8, obs_noise=False), SIM, seed=0)
    layout = env.terrain_layout
    sub = [layout.sub_terrains[int(i)] for i in env.sub_terrain]
    assert len({s.name for s in sub}) > 1  # several heights in use
    s = env.state
    height = torch.tensor([x.height for x in sub])
    edge_x = torch.tensor([x.anchor[0] for x in sub])
    dist = edge_x - s.base_pos[:, 0]
    assert torch.all((dist >= 0.4 - 1e-5) & (dist <= 0.5 + 1e-5)), dist  # HoST: 0.4-0.5 m from the edge
    torch.testing.assert_close(s.base_pos[:, 2], height + 0.5)
    torch.testing.assert_close(s.base_pos[:, 1], torch.tensor([x.anchor[1] for x in sub]))
    assert torch.all(s.feet_pos[:, :, 0].mean(1) > s.base_pos[:, 0])  # legs toward the edge
    knees = [g1.POLICY_JOINT_NAMES.index(f"{side}_knee_joint") for side in ("left", "right")]
    assert torch.all(s.q[:, knees] > 0.6)  # knee 1.0 x U(0.8, 1.2) + U(-0.1, 0.1)
    _run_passive(env)
    on_top = env.state.base_pos[:, 2] > height + 0.05
    assert on_top.float().mean() >= 0.75, env.state.base_pos


def test_wall_robot_is_seated_and_leaning_on_the_ramp_after_the_passive_phase():
    env = StandupEnv(_exact_start("wall", num_envs=12), SIM, seed=0)
    s0 = env.state
    torch.testing.assert_close(s0.projected_gravity, torch.tensor([0.0, 0.0, -1.0]).expand(12, 3), atol=1e-5, rtol=0)
    hip = g1.POLICY_JOINT_NAMES.index("left_hip_pitch_joint")
    assert torch.allclose(s0.q[:, hip], torch.tensor(-1.5))  # seated: thighs forward
    _run_passive(env)
    s = env.state
    seen = set()
    for i in range(env.num_envs):
        sub = env.terrain_layout.sub_terrains[int(env.sub_terrain[i])]
        seen.add(sub.name)
        touching = [p for p in _contacts(env, i) if set(p) & set(sub.geoms)]
        trunk = {g for p in touching for g in p} & {"torso_collision", "pelvis_collision"}
        assert trunk, (sub.name, touching)  # the back rests on the ramp
        g = s.projected_gravity[i]
        back_tilt = math.degrees(math.atan2(-float(g[0]), -float(g[2])))  # leaning back toward -x
        assert abs(back_tilt - (90.0 - math.degrees(sub.angle))) < 15.0, (sub.name, back_tilt)
        assert s.base_pos[i, 2] < 0.3 and s.feet_pos[i, :, 2].mean() < 0.2  # seated on the ground
    assert len(seen) >= 5


@pytest.mark.parametrize(("terrain", "posture"), [("ground", "prone"), ("slope", "prone"), ("ground", "supine")])
def test_prone_starts_face_down_and_supine_face_up(terrain, posture):
    env = StandupEnv(standup_env_cfg(terrain, posture, num_envs=4, obs_noise=False), SIM, seed=0)
    g = env.state.projected_gravity
    # the pelvis x axis points out of the belly: gravity along +x in the base frame when face down
    sign = 1.0 if posture == "prone" else -1.0
    assert torch.all(sign * g[:, 0] > 0.99), g
    if terrain == "slope":  # head uphill (-x), feet downhill
        assert torch.all(env.state.head_pos[:, 0] < env.state.base_pos[:, 0])
    _run_passive(env)
    assert (sign * env.state.projected_gravity[:, 0] > 0.5).float().mean() >= 0.75


def test_terrain_reset_pose_and_slope_gains():
    wall = StandupEnv(_exact_start("wall", num_envs=2), SIM, seed=0)
    names = g1.JOINT_NAMES
    for joint, angle in [("left_hip_pitch_joint", -1.5), ("right_knee_joint", 0.0), ("left_elbow_joint", 0.0)]:
        assert wall.reset_pose[names.index(joint)] == pytest.approx(angle)
        assert wall.sim.state.qpos[0, wall._q_adr[names.index(joint)]] == pytest.approx(angle, abs=1e-6)
    assert wall.default_pose[names.index("left_elbow_joint")] == pytest.approx(0.8)  # held/default pose unchanged
    slope = StandupEnv(standup_env_cfg("slope", num_envs=1), SIM, seed=0)
    ground = StandupEnv(StandupEnvCfg(num_envs=1), SIM, seed=0)
    for joint, kp, kp_ground in [
        ("left_hip_pitch_joint", 100.0, 150.0),
        ("right_knee_joint", 150.0, 200.0),
        ("left_ankle_pitch_joint", 40.0, 40.0),
    ]:
        a = names.index(joint)
        assert slope.model.actuator_gainprm[a, 0] == kp and slope.model.actuator_biasprm[a, 1] == -kp
        assert slope.robot.kp[a] == kp and ground.robot.kp[a] == kp_ground
        assert ground.model.actuator_gainprm[a, 0] == kp_ground


# ------------------------------------------------------------------ passive push
@pytest.mark.parametrize(("terrain", "push"), [("wall", -100.0), ("slope", -100.0), ("platform", 0.0)])
def test_passive_phase_pushes_the_torso_along_minus_x(terrain, push):
    env = StandupEnv(standup_env_cfg(terrain, num_envs=2, obs_noise=False), SIM, seed=0)
    assert env.cfg.unactuated_steps == (50 if push else 30)
    zero = torch.zeros(2, env.num_actions)
    env.step(zero)
    assert torch.all(env.push_force == push) and torch.all(env.pull_force == 0)
    for _ in range(env.cfg.unactuated_steps):
        env.step(zero)
    assert torch.all(env.push_force == 0)  # actuated: no push (the pull force may act)


def test_push_moves_the_wall_robot_back():
    x = {}
    for push in (0.0, -100.0):
        env = StandupEnv(_exact_start("wall", num_envs=1, passive_push_force=push), SIM, seed=0)
        _run_passive(env)
        x[push] = float(env.state.head_pos[0, 0])
    assert x[-100.0] < x[0.0] - 0.01


# ------------------------------------------------------------------ terminations
def _state(base_z: float, head_z: float, feet_z: float, step: int = 100) -> StandupState:
    s = StandupState.zeros(1)
    s.base_pos[:, 2], s.head_pos[:, 2], s.feet_pos[:, :, 2] = base_z, head_z, feet_z
    s.episode_step[:] = step
    return s


@pytest.mark.parametrize(
    ("checks", "base_z", "head_z", "feet_z", "expected"),
    [
        (PLATFORM_TERMINATION, 0.15, 0.5, 0.05, True),  # fell off the box
        (PLATFORM_TERMINATION, 0.5, 0.8, 0.40, True),  # climbed onto the box
        (PLATFORM_TERMINATION, 0.5, 0.8, 0.30, False),
        (WALL_TERMINATION, 0.15, 0.15, 0.05, True),  # head below 0.2 m
        (WALL_TERMINATION, 0.15, 0.25, 0.40, True),  # feet on the ramp
        (WALL_TERMINATION, 0.15, 0.25, 0.05, False),
        (SLOPE_TERMINATION, 0.30, 0.5, 0.45, True),  # pelvis 0.15 m below the feet
        (SLOPE_TERMINATION, 0.30, 0.5, 0.35, False),
        (GROUND_TERMINATION, 0.0, 0.0, 1.0, False),
    ],
)
def test_terrain_terminations(checks, base_z, head_z, feet_z, expected):
    assert bool(terrain_fall(_state(base_z, head_z, feet_z), checks, unactuated_steps=30)) is expected
    assert not bool(terrain_fall(_state(base_z, head_z, feet_z, step=30), checks, unactuated_steps=30))  # passive


def test_platform_env_terminates_a_robot_lying_on_the_ground():
    env = StandupEnv(_exact_start("platform", num_envs=2), SIM, seed=0)
    _run_passive(env)
    qpos = env.sim.state.qpos.clone()
    qpos[1, 0] += 1.0  # in front of the box,
    qpos[1, 2] = 0.12  # lying on the ground: pelvis z < 0.2 m
    qvel = torch.zeros_like(env.sim.state.qvel)
    env.sim.reset_envs(torch.tensor([1]), qpos[1:2], qvel[1:2])
    env.state = env._read_state()
    _, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert dones.tolist() == [0, 1] and not extras["time_outs"].any()
    s = env.last_state
    assert s.base_pos[1, 2] < 0.2 and s.base_pos[0, 2] > 0.2  # by the platform check, not a velocity blow-up
    assert not velocity_explosion(s, unactuated_steps=env.cfg.unactuated_steps).any()


# ------------------------------------------------------------------ evaluation success
def test_success_criteria_per_terrain():
    rise_then = lambda low: torch.tensor([[0.2, 0.5, 0.75, low, 0.75]])  # noqa: E731
    crit = metrics.SUCCESS_CRITERIA
    assert TERRAINS["platform"].success is crit["platform"]
    ok = lambda c, h: bool(metrics.success(h, c.stand_height, c.fall_height))  # noqa: E731
    assert ok(crit["platform"], rise_then(0.35)) and not ok(crit["ground"], rise_then(0.35))
    assert not ok(crit["platform"], rise_then(0.25))
    wall_dip = torch.tensor([[0.2, 0.65, 0.15, 0.62]])
    assert ok(crit["wall"], wall_dip) and not ok(crit["platform"], wall_dip)
    assert not ok(crit["wall"], torch.tensor([[0.2, 0.65, 0.05]]))
    # slope: pelvis height above the feet, not world z
    base = torch.tensor([[[0.0, 0.0, 1.0]]])  # (N=1, T=1, 3): pelvis at 1.0 m
    feet = torch.tensor([[[[0.0, 0.0, 0.5], [0.0, 0.0, 0.5]]]])  # feet at 0.5 m
    h = crit["slope"].height(base, feet)
    assert h.item() == pytest.approx(0.5) and crit["ground"].height(base, feet).item() == pytest.approx(1.0)
    assert not ok(crit["slope"], h) and ok(crit["ground"], torch.tensor([[1.0]]))


def test_evaluate_builds_the_terrain_and_uses_its_criterion(tmp_path, capsys):
    from upright.training import evaluate

    evaluate.main(
        [
            "--policy",
            "zero",
            "--terrain",
            "wall",
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--episode-length-s",
            "0.4",
            "--out",
            str(tmp_path),
            "sim.num_threads=1",
            "recipe=host",  # the get-up recipe is written for flat ground only
        ]
    )
    rows = list(csv.DictReader(open(tmp_path / "eval.csv")))
    assert rows[0]["terrain"] == "wall" and float(rows[0]["E_succ"]) == 0.0
    md = (tmp_path / "eval.md").read_text()
    assert "| wall | HoST Table III | 1250 | 94.20" in md
    assert "terrain wall" in md and "pelvis z > 0.6 m, then never < 0.1 m" in md


def test_run_episodes_uses_the_env_terrain_criterion():
    from upright.training.evaluate import run_episodes

    env = StandupEnv(
        standup_env_cfg("platform", num_envs=2, obs_noise=False, episode_length_s=0.8, **{"curriculum.enabled": False}),
        SIM,
        seed=0,
    )
    assert env.terrain.success is metrics.SUCCESS_CRITERIA["platform"]
    # the start (0.5 m above a 0.22-0.46 m box) is above 0.7 m, but heights count from the first actuated step
    assert torch.all(env.state.base_pos[:, 2] > 0.7)
    policy = lambda obs: torch.zeros(obs.shape[0], env.num_actions)  # noqa: E731
    # a lenient criterion that a robot lying on a >= 0.22 m box meets (pelvis z > 0.25 m)
    lenient = metrics.SuccessCriterion(0.25, 0.2)
    assert run_episodes(env, policy, 2, lenient)["E_succ"].tolist() == [100.0, 100.0]
    assert run_episodes(env, policy, 2)["E_succ"].tolist() == [0.0, 0.0]


# ------------------------------------------------------------------ config
def test_hydra_terrain_and_posture_keys_reach_the_env_config():
    from hydra import compose, initialize

    from upright.conf import register_configs

    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            "config", overrides=["task=standup", "recipe=host", "terrain=slope", "posture=prone", "env.init_height=0.7"]
        )
        ground = compose("config", overrides=["task=standup", "recipe=host"])
    e = cfg.env
    assert (e.terrain, e.posture, e.unactuated_steps, e.passive_push_force) == ("slope", "prone", 50, -100.0)
    assert e.curriculum.beta_min == 0.3 and list(e.init_joint_scale) == [0.8, 1.2]
    assert e.init_height == 0.7  # explicit env.* overrides still win
    assert (ground.env.terrain, ground.env.posture, ground.env.unactuated_steps) == ("ground", "supine", 30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["terrain=stairs"], "Unknown terrain 'stairs'. Valid terrains: ground, platform, wall, slope"),
        (["posture=sideways"], "Unknown posture 'sideways'. Valid postures: supine, prone"),
        (["terrain=wall", "posture=prone"], "terrain=wall has no posture=prone"),
        (["env.terrain=wall"], "top-level key terrain=<name>"),
    ],
)
def test_bad_terrain_or_posture_exits_with_the_valid_choices(args, message, capsys):
    from upright.conf.validate import exit_on_invalid_overrides

    with pytest.raises(SystemExit) as exc:
        exit_on_invalid_overrides(["task=standup", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_env_rejects_a_bad_terrain_or_posture():
    with pytest.raises(ValueError, match="Valid terrains: ground, platform, wall, slope"):
        StandupEnv(StandupEnvCfg(num_envs=1, terrain="stairs"), SIM)
    with pytest.raises(ValueError, match="Valid postures for terrain=platform: supine"):
        check_variant("platform", "prone")


# ------------------------------------------------------------------ MJX
@pytest.mark.slow
def test_wall_builds_and_steps_on_mjx_like_native():
    """Wall (rotated boxes, push) on MJX with N = 4: 50 passive + 10 zero-action steps; the pelvis ends within
    5 cm and the projected gravity within 0.1 of the native backend's (measured: 2.2 cm, 0.01)."""
    pytest.importorskip("jax")
    out = {}
    for backend in ("native", "mjx"):
        env = StandupEnv(standup_env_cfg("wall", num_envs=4), SimCfg(backend=backend, num_threads=1), seed=0)
        zero = torch.zeros(4, env.num_actions)
        for _ in range(env.cfg.unactuated_steps + 10):
            env.step(zero)
        s = env.state
        out[backend] = (env.sub_terrain.clone(), s.base_pos.clone(), s.projected_gravity.clone())
        assert torch.isfinite(s.base_pos).all()
        env.close()
    (sub_n, pos_n, g_n), (sub_m, pos_m, g_m) = out["native"], out["mjx"]
    assert torch.equal(sub_n, sub_m)
    assert (pos_n - pos_m).abs().max() < 0.05, (pos_n, pos_m)
    assert (g_n - g_m).abs().max() < 0.1, (g_n, g_m)
    assert torch.all(pos_m[:, 2] < 0.3)  # seated against the ramp on MJX too
