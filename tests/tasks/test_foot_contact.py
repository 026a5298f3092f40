"""Foot contact forces from the scene's contact sensors (:mod:`upright.tasks.standup.foot_contact`) on a real G1:
standing on flat ground, and pushed sideways against a box (the feet-stumble reward's input)."""

import mujoco
import torch

from upright.robots import g1
from upright.sim.options import PhysicsOptions, apply_physics_options
from upright.tasks.standup.foot_contact import FootContactReader, add_foot_contact_sensors
from upright.tasks.standup.rewards import style
from upright.tasks.standup.scene import standup_scene
from upright.tasks.standup.state import StandupState

BOX_GAP = 0.01
"""Gap between the left foot's outer edge and the box's face, m."""


def _scene_with_box() -> mujoco.MjModel:
    """G1 + floor + a 0.1 m high box left (+y) of the left foot (moved in place by :func:`_stand`)."""
    spec = g1.g1_spec()
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        contype=g1.TERRAIN_CONTYPE,
        conaffinity=g1.TERRAIN_CONAFFINITY,
    )
    spec.worldbody.add_geom(
        name="box",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[0.4, 0.1, 0.05],
        pos=[0.0, 0.0, 0.05],
        contype=g1.TERRAIN_CONTYPE,
        conaffinity=g1.TERRAIN_CONAFFINITY,
    )
    add_foot_contact_sensors(spec)
    apply_physics_options(spec, PhysicsOptions())
    return spec.compile()


def _stand(
    m: mujoco.MjModel, steps: int, push_y: float = 0.0, push_steps: int = 0, box_y: bool = False
) -> mujoco.MjData:
    """The robot in the default pose, feet 3.5 cm above the floor, PD-held for ``steps`` physics steps
    (0.005 s), then ``push_steps`` more with ``push_y`` N along world y on the left foot."""
    info = g1.robot_info()
    d = mujoco.MjData(m)
    d.qpos[[m.jnt_qposadr[m.actuator_trnid[i, 0]] for i in range(m.nu)]] = info.default_pose
    mujoco.mj_forward(m, d)
    feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, f"{s}_foot") for s in ("left", "right")]
    d.qpos[2] += 0.035 - d.site_xpos[feet, 2].min()
    if box_y:  # put the box's -y face BOX_GAP beyond the left foot's outermost geom point
        bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "left_ankle_roll_link")
        mujoco.mj_forward(m, d)
        foot_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == bid and m.geom_contype[g]]
        edge = max(d.geom_xpos[g, 1] + m.geom_size[g, 0] for g in foot_geoms)  # capsules along x: y extent = radius
        m.geom_pos[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "box"), 1] = edge + BOX_GAP + 0.1
    foot = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "left_ankle_roll_link")
    for k in range(steps + push_steps):
        d.ctrl[:] = info.default_pose
        d.xfrc_applied[foot, 1] = push_y if k >= steps else 0.0
        mujoco.mj_step(m, d)
    return d


def _forces(m: mujoco.MjModel, d: mujoco.MjData) -> torch.Tensor:
    return FootContactReader(m)(torch.tensor(d.sensordata, dtype=torch.float32)[None])[0]


def test_standing_robot_feet_carry_its_weight():
    m = standup_scene(terrain="ground")
    d = _stand(m, steps=100)  # 0.5 s
    assert d.qpos[2] > 0.7  # still standing
    f = _forces(m, d)
    weight = float(m.body_subtreemass[m.body_rootid[1]]) * 9.81  # ~327 N
    fz = f[:, 2]
    assert torch.all(fz > 0.35 * weight) and torch.all(fz < 0.65 * weight), f  # each foot carries about half
    assert abs(float(fz.sum()) - weight) < 0.1 * weight, (float(fz.sum()), weight)
    assert torch.all(f[:, :2].norm(dim=-1) < 0.15 * fz), f  # small horizontal part
    state = StandupState.zeros(1)
    state.feet_contact_force[0] = f
    assert style.feet_stumble(state).item() == 0.0


def test_foot_pushed_sideways_against_a_box_stumbles():
    m = _scene_with_box()
    f0 = _forces(m, _stand(m, steps=100, box_y=True))
    assert f0[0, 1].abs() < 0.15 * f0[0, 2], f0  # standing 1 cm from the box: not touching it
    d = _stand(m, steps=100, push_y=600.0, push_steps=10, box_y=True)  # then the left foot is shoved into it
    f = _forces(m, d)
    assert f[0, 1] < -3.0 * f[0, 2].abs(), f  # the box pushes the left foot toward -y, much more than up
    state = StandupState.zeros(1)
    state.feet_contact_force[0] = f
    assert style.feet_stumble(state).item() == 1.0
