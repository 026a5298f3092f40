"""Run an exported get-up policy in a plain MuJoCo loop that reads only the ONNX file and its metadata.

Nothing of upright is imported: this is what a user with their own simulator does with ``policy.onnx``. The robot is
Menagerie's G1 file as it ships (``unitree_g1/g1_mjlab.xml``: no actuators, capsule collision geoms, every pair of
bodies colliding except the file's four ``<exclude>``s), on a MuJoCo plane with MuJoCo's default friction. Everything
else comes from the file's metadata (``upright_metadata_version`` 3):

- joints, Kp/Kd and torque limits of the policy joints (``joint_names``, ``kp``, ``kd``, ``torque_limit``) and of the
  joints held at a fixed target (``held_*``), as MuJoCo ``position`` actuators (PD at every physics step);
- each joint's armature, the reflected inertia of its motors (``armature``, ``held_armature``; the model file ships
  none, and without it these gains make MuJoCo's step diverge within a second);
- the physics period and the control period's substeps (``sim_dt``, ``decimation``);
- the observation (``observation_names``/``_dims``/``_scales``/``_clip``, 6 frames oldest first, the first frame after
  a reset filling every slot), read from the file's own sensors: the pelvis IMU's gyro (``imu_ang_vel``) and its
  orientation (gravity in the pelvis frame), the joint encoders and the last action;
- the action (``action_mode`` relative: PD target = measured q + ``action_scale`` · action, held for one control
  period) and the settle (``unactuated_steps`` control periods whose target is the measured q; last action 0).

Each episode drops the robot from 0.3 m, lying on its back (``--posture supine``) or front, with a random yaw and
joint angles of the default pose ± 0.1 rad, and runs ``--seconds`` (5 s: HoST's evaluation). Success is HoST's
ground criterion on the pelvis height: above 0.7 m at some control step, and never below 0.5 m after that.

    python examples/standalone_getup.py --policy upright/assets/policies/g1_getup/policy.onnx --posture prone \
        --episodes 20 [--model <menagerie>/unitree_g1/g1_mjlab.xml] [--seed 0]

Prints one line per episode (peak pelvis height, m; success) and the success rate. Exit code 2 with one line for a
file that is not a get-up policy with this metadata, or a missing model file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys

import mujoco
import numpy as np
import onnx
import onnxruntime as ort

NEEDED = (
    "joint_names",
    "kp",
    "kd",
    "torque_limit",
    "default_joint_pos",
    "held_joint_names",
    "held_kp",
    "held_kd",
    "held_torque_limit",
    "held_joint_pos",
    "sim_dt",
    "decimation",
    "observation_names",
    "observation_dims",
    "observation_scales",
    "observation_clip",
    "observation_history_length",
    "action_mode",
    "action_scale",
    "action_clip",
    "unactuated_steps",
    "armature",
    "held_armature",
)
"""Metadata keys this loop reads."""

FRAME_TERMS = ("base_ang_vel", "projected_gravity", "joint_pos", "joint_vel", "last_action")
"""The observation terms this loop can build, in the order a get-up policy of metadata version 3 lists them."""


def read_metadata(path: pathlib.Path) -> dict:
    """The ONNX file's ``metadata_props``, JSON-decoded (weights not loaded).

    Raises:
        ValueError: not a get-up policy this loop can run (names the missing key or the unsupported value).
    """
    try:
        props = onnx.load(str(path), load_external_data=False).metadata_props
        meta = {p.key: json.loads(p.value) for p in props}
    except Exception as err:  # noqa: BLE001  not an ONNX file, or metadata that is not JSON
        name = type(err).__name__
        raise ValueError(f"{path} is not a readable policy.onnx ({name}): export one with upright") from None
    missing = [k for k in NEEDED if k not in meta]
    if missing:
        raise ValueError(
            f"{path}: metadata keys {missing} missing: export a recipe=getup policy, or add the keys to an older file "
            f"with python -m upright.training.export --refresh-metadata {path}"
        )
    if meta["action_mode"] != "relative" or tuple(meta["observation_names"]) != FRAME_TERMS:
        raise ValueError(
            f"{path}: action_mode {meta['action_mode']}, terms {meta['observation_names']}: not a get-up policy "
            "(this loop builds recipe=getup's 5 terms; run other policies with play.py or upright-deploy)"
        )
    for key, want in (
        ("observation_history_order", "oldest_first"),
        ("observation_history_start", "first_frame"),
        ("observation_normalizer", "included in the graph"),
    ):
        if meta.get(key, want) != want:
            raise ValueError(f"{path}: {key} {meta[key]!r}: this loop builds {want!r} only; re-export the policy")
    n, nh = len(meta["joint_names"]), len(meta["held_joint_names"])
    for key in ("kp", "kd", "torque_limit", "default_joint_pos", "armature"):
        if len(meta[key]) != n:
            raise ValueError(f"{path}: {key} has {len(meta[key])} values for {n} joints: re-export the policy")
    for key in ("held_kp", "held_kd", "held_torque_limit", "held_joint_pos", "held_armature"):
        if len(meta[key]) != nh:
            raise ValueError(f"{path}: {key} has {len(meta[key])} values for {nh} held joints: re-export the policy")
    return meta


def build_model(xml: pathlib.Path, meta: dict) -> mujoco.MjModel:
    """Menagerie's G1 on a plane, with a position actuator (Kp, Kd = kv, ± torque limit) and the armature of each
    policy and held joint.

    Raises:
        ValueError: the model has no joint of that name (not the 29-DoF G1).
    """
    spec = mujoco.MjSpec.from_file(str(xml))
    spec.option.timestep = float(meta["sim_dt"])
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], name="floor")
    joints = list(meta["joint_names"]) + list(meta["held_joint_names"])
    kp = list(meta["kp"]) + list(meta["held_kp"])
    kd = list(meta["kd"]) + list(meta["held_kd"])
    limit = list(meta["torque_limit"]) + list(meta["held_torque_limit"])
    armature = list(meta["armature"]) + list(meta["held_armature"])
    for name, p, d, lim, inertia in zip(joints, kp, kd, limit, armature):
        joint = spec.joint(name)
        if joint is None:
            raise ValueError(f"{xml} has no joint {name}: use the G1 (29 DoF) model the policy was trained on")
        joint.armature = inertia
        act = spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=p, kv=d)
        act.forcelimited, act.forcerange = True, [-lim, lim]
    return spec.compile()


class GetupLoop:
    """One robot, one policy: reset, observe, act (the metadata's definitions, restated here)."""

    def __init__(self, model: mujoco.MjModel, meta: dict, session: ort.InferenceSession):
        self.m, self.meta, self.session = model, meta, session
        self.d = mujoco.MjData(model)
        joint = lambda n: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)  # noqa: E731
        self.qadr = np.array([model.jnt_qposadr[joint(n)] for n in meta["joint_names"]])
        self.vadr = np.array([model.jnt_dofadr[joint(n)] for n in meta["joint_names"]])
        self.held_qadr = np.array([model.jnt_qposadr[joint(n)] for n in meta["held_joint_names"]])
        act = lambda n: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n)  # noqa: E731
        self.act = np.array([act(n) for n in meta["joint_names"]])
        self.held_act = np.array([act(n) for n in meta["held_joint_names"]])
        sensor = model.sensor("imu_ang_vel")
        self.gyro = slice(sensor.adr[0], sensor.adr[0] + 3)
        self.imu_site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "imu_in_pelvis")
        self.default_q = np.array(meta["default_joint_pos"])
        self.scales = np.repeat(meta["observation_scales"], meta["observation_dims"])
        self.n_hist = int(meta["observation_history_length"])
        self.history: list[np.ndarray] = []
        self.last_action = np.zeros(len(self.qadr))
        self.steps = 0

    def reset(self, posture: str, rng: np.random.Generator) -> None:
        """Lying on the back (supine) or front (prone) 0.3 m above the plane, random yaw, default joints ± 0.1 rad."""
        mujoco.mj_resetData(self.m, self.d)
        pitch = -math.pi / 2 if posture == "supine" else math.pi / 2  # body x (forward) up / down
        yaw = rng.uniform(-math.pi, math.pi)
        qy = np.array([math.cos(pitch / 2), 0, math.sin(pitch / 2), 0])
        qz = np.array([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)])
        quat = np.zeros(4)
        mujoco.mju_mulQuat(quat, qz, qy)
        self.d.qpos[:3] = [0, 0, 0.3]
        self.d.qpos[3:7] = quat
        self.d.qpos[self.qadr] = self.default_q + rng.uniform(-0.1, 0.1, len(self.qadr))
        self.d.qpos[self.held_qadr] = self.meta["held_joint_pos"]
        self.d.ctrl[self.held_act] = self.meta["held_joint_pos"]
        mujoco.mj_forward(self.m, self.d)
        self.last_action[:] = 0.0
        self.history, self.steps = [], 0

    def frame(self) -> np.ndarray:
        """One observation frame: gyro (pelvis frame, rad/s), gravity in the pelvis frame, q (rad), dq (rad/s), last
        action, each times its scale, clipped."""
        gravity = self.d.site_xmat[self.imu_site].reshape(3, 3).T @ np.array([0.0, 0.0, -1.0])
        q, dq = self.d.qpos[self.qadr], self.d.qvel[self.vadr]
        raw = np.concatenate([self.d.sensordata[self.gyro], gravity, q, dq, self.last_action])
        clip = float(self.meta["observation_clip"])
        return np.clip(raw * self.scales, -clip, clip)

    def step(self) -> None:
        """One control period: observe, run the policy, set the PD targets, step the physics ``decimation`` times."""
        f = self.frame()
        self.history = [f] * self.n_hist if not self.history else [*self.history[1:], f]
        obs = np.concatenate(self.history)[None].astype(np.float32)
        action = self.session.run(None, {self.session.get_inputs()[0].name: obs})[0][0].astype(np.float64)
        clip = float(self.meta["action_clip"])
        action = np.clip(action, -clip, clip)
        q = self.d.qpos[self.qadr]
        if self.steps < int(self.meta["unactuated_steps"]):  # the settle: hold where it is
            self.d.ctrl[self.act], self.last_action[:] = q, 0.0
        else:
            self.d.ctrl[self.act], self.last_action[:] = q + float(self.meta["action_scale"]) * action, action
        mujoco.mj_step(self.m, self.d, nstep=int(self.meta["decimation"]))
        self.steps += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", required=True, type=pathlib.Path)
    parser.add_argument("--posture", choices=("supine", "prone"), default="supine")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    default_xml = pathlib.Path(os.environ.get("MENAGERIE_ROOT", "mujoco_menagerie")) / "unitree_g1" / "g1_mjlab.xml"
    parser.add_argument(
        "--model", type=pathlib.Path, default=default_xml, help="the G1 MJCF (default: $MENAGERIE_ROOT)"
    )
    args = parser.parse_args(argv)
    try:
        if not args.model.is_file():
            raise ValueError(f"no model file {args.model}: set MENAGERIE_ROOT or pass --model")
        if not args.policy.is_file():
            raise ValueError(f"no policy file {args.policy}: pass --policy <folder>/policy.onnx")
        meta = read_metadata(args.policy)
        model = build_model(args.model, meta)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    session = ort.InferenceSession(str(args.policy), providers=["CPUExecutionProvider"])
    loop = GetupLoop(model, meta, session)
    rng = np.random.default_rng(args.seed)
    control_dt = float(meta["sim_dt"]) * int(meta["decimation"])
    successes = 0
    for episode in range(args.episodes):
        loop.reset(args.posture, rng)
        peak, stood, fell = 0.0, False, False
        for _ in range(round(args.seconds / control_dt)):
            loop.step()
            z = float(loop.d.qpos[2])  # pelvis height, m
            peak = max(peak, z)
            stood = stood or z > 0.7
            fell = fell or (stood and z < 0.5)
        ok = stood and not fell
        successes += ok
        print(f"episode {episode}: {args.posture}, peak pelvis {peak:.2f} m, {'success' if ok else 'failure'}")
    print(f"success {successes}/{args.episodes} ({100.0 * successes / max(args.episodes, 1):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
