"""Recorded episodes the viewers replay without a policy.

**qpos trajectory** (``.npz``, written by ``play.py record=...`` and by evaluation), format
``upright-qpos-v1``:

======================  ==========  ================================================================
key                     shape       meaning
======================  ==========  ================================================================
``format``              ()          ``"upright-qpos-v1"``
``qpos``                (T, nq)     MuJoCo generalised positions, float64 (free joint: pos m, quat wxyz)
``dt``                  ()          seconds between frames (the control period, 0.02 s)
``episode``             (T,)        int64 episode index of each frame (0, 0, …, 1, 1, …)
``time``                (T,)        seconds since the frame's episode started
``task``                ()          task name (``"standup"``)
``model``               ()          robot/model name (``"unitree_g1_29dof"``)
``joint_names``         (nj,)       names of the model's joints in qpos order (free joint first)
``qvel``                (T, nv)     optional: generalised velocities
``head_height``         (T,)        optional: head height above the feet, m
``reward_groups``       (T, G)      optional: per-step reward of each group; names in ``reward_group_names``
``source``              ()          optional: what produced it (policy path, command)
======================  ==========  ================================================================

**deploy-daemon dataset** (LeRobot v3 folder written by ``upright-deploy run --dataset``): the frames hold
the policy joints' angles (``observation.state``: ``q.<joint>``, ``dq.<joint>``, ``gyro.*``,
``gravity.*``) but not the base pose, which the robot does not measure. :func:`dataset_to_trajectory`
rebuilds qpos with an estimated floating base: roll/pitch from the logged gravity direction, yaw from
integrating the gyro's world-z rate (starting at 0), x/y fixed at the origin, and the height that puts
the lowest collision geom on the ground (from bounding boxes: a few cm high; a robot in the air is shown
on the ground). Joints the dataset lacks (held joints) stay at the default pose.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field

import mujoco
import numpy as np

FORMAT = "upright-qpos-v1"


class TrajectoryError(ValueError):
    """A recording cannot be read or does not fit the model (the message says why)."""


@dataclass
class Trajectory:
    """A sequence of qpos frames with their episode index and time."""

    qpos: np.ndarray
    """(T, nq) float64."""
    dt: float
    episode: np.ndarray
    """(T,) int64."""
    time: np.ndarray
    """(T,) float64 seconds since the episode started."""
    task: str = ""
    model: str = ""
    joint_names: list[str] = field(default_factory=list)
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """Optional per-frame arrays: qvel, head_height, reward_groups (+ reward_group_names)."""
    note: str = ""
    """How it was obtained (e.g. the base-pose estimate of a deploy dataset)."""

    def __len__(self) -> int:
        return int(self.qpos.shape[0])

    def select_episode(self, index: int | None) -> Trajectory:
        """The frames of episode ``index`` (None: all).

        Raises:
            TrajectoryError: no such episode (the message lists the available ones).
        """
        if index is None:
            return self
        mask = self.episode == index
        if not mask.any():
            raise TrajectoryError(
                f"replay_episode={index}: the recording has episodes {sorted(set(self.episode.tolist()))}"
            )
        extras = {k: (v[mask] if v.ndim and v.shape[0] == len(self) else v) for k, v in self.extras.items()}
        return Trajectory(
            self.qpos[mask],
            self.dt,
            self.episode[mask],
            self.time[mask],
            self.task,
            self.model,
            self.joint_names,
            extras,
            self.note,
        )


def model_joint_names(model: mujoco.MjModel) -> list[str]:
    """Names of all joints of ``model`` in qpos order."""
    order = np.argsort(model.jnt_qposadr)
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(j)) or f"joint{j}" for j in order]


def save_trajectory(path: str | pathlib.Path, traj: Trajectory, source: str = "") -> pathlib.Path:
    """Write ``traj`` as an ``upright-qpos-v1`` ``.npz`` (parent folders created)."""
    path = pathlib.Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {
        "format": np.array(FORMAT),
        "qpos": np.asarray(traj.qpos, np.float64),
        "dt": np.array(float(traj.dt)),
        "episode": np.asarray(traj.episode, np.int64),
        "time": np.asarray(traj.time, np.float64),
        "task": np.array(traj.task),
        "model": np.array(traj.model),
        "joint_names": np.array(traj.joint_names, dtype=str),
        "source": np.array(source),
        **{k: np.asarray(v) for k, v in traj.extras.items()},
    }
    np.savez_compressed(path, **arrays)
    return path


def load_trajectory(path: str | pathlib.Path) -> Trajectory:
    """Read an ``upright-qpos-v1`` ``.npz``.

    Raises:
        TrajectoryError: not such a file (missing keys are named).
    """
    path = pathlib.Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as err:  # noqa: BLE001  anything np.load raises: not an .npz
        raise TrajectoryError(f"replay={path}: cannot read as .npz ({type(err).__name__}: {err})") from None
    with data:
        keys = set(data.files)
        missing = [k for k in ("qpos", "dt") if k not in keys]
        if missing:
            raise TrajectoryError(
                f"replay={path}: not a qpos trajectory, keys {missing} are missing (has {sorted(keys)})"
            )
        qpos = np.asarray(data["qpos"], np.float64)
        if qpos.ndim != 2 or qpos.shape[0] == 0:
            raise TrajectoryError(f"replay={path}: qpos must be (T, nq) with T > 0, got {qpos.shape}")
        n = qpos.shape[0]
        dt = float(data["dt"])
        episode = np.asarray(data["episode"], np.int64) if "episode" in keys else np.zeros(n, np.int64)
        time = np.asarray(data["time"], np.float64) if "time" in keys else np.arange(n) * dt
        text = lambda k: str(data[k]) if k in keys else ""  # noqa: E731
        names = [str(s) for s in data["joint_names"]] if "joint_names" in keys else []
        known = {"format", "qpos", "dt", "episode", "time", "task", "model", "joint_names", "source"}
        extras = {k: np.asarray(data[k]) for k in keys - known}
        return Trajectory(qpos, dt, episode, time, text("task"), text("model"), names, extras, text("source"))


def check_fits_model(traj: Trajectory, model: mujoco.MjModel, where: str = "") -> None:
    """Raise :class:`TrajectoryError` if ``traj`` was not recorded with ``model``'s joints."""
    if traj.qpos.shape[1] != model.nq:
        raise TrajectoryError(
            f"{where}qpos has {traj.qpos.shape[1]} entries per frame, the task's model has nq={model.nq}"
        )
    if traj.joint_names and traj.joint_names != model_joint_names(model):
        raise TrajectoryError(f"{where}joint names differ from the task's model (recorded with another robot/model?)")


# ---------------------------------------------------------------------------------------------- datasets
def is_deploy_dataset(path: str | pathlib.Path) -> bool:
    """True if ``path`` is a LeRobot v3 dataset folder (``meta/info.json``)."""
    return (pathlib.Path(path) / "meta" / "info.json").is_file()


def quat_from_gravity(gravity_body: np.ndarray) -> np.ndarray:
    """Shortest-arc rotation (w, x, y, z) whose inverse maps world down (0, 0, -1) to ``gravity_body``.

    That is a body orientation with the measured tilt; the heading it implies is arbitrary.
    """
    g = np.asarray(gravity_body, np.float64)
    g = g / max(np.linalg.norm(g), 1e-9)
    up_body = -g  # world z seen in the body frame; rotate it onto world z
    z = np.array([0.0, 0.0, 1.0])
    c = float(np.dot(up_body, z))
    if c < -1.0 + 1e-9:  # upside down: 180° about x
        return np.array([0.0, 1.0, 0.0, 0.0])
    axis = np.cross(up_body, z)
    q = np.array([1.0 + c, *axis])
    return q / np.linalg.norm(q)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_mulQuat(out, a, b)
    return out


def _lowest_point(model: mujoco.MjModel, data: mujoco.MjData, geoms: np.ndarray) -> float:
    """Lowest z of the oriented bounding boxes of ``geoms`` (after kinematics)."""
    aabb = model.geom_aabb[geoms]  # (k, 6): local center, half sizes
    xmat = data.geom_xmat[geoms].reshape(-1, 3, 3)
    center_z = data.geom_xpos[geoms, 2] + np.einsum("kj,kj->k", xmat[:, 2, :], aabb[:, :3])
    extent_z = np.einsum("kj,kj->k", np.abs(xmat[:, 2, :]), aabb[:, 3:])
    return float(np.min(center_z - extent_z))


def dataset_to_trajectory(
    root: str | pathlib.Path,
    model: mujoco.MjModel,
    default_qpos: np.ndarray | None = None,
    task: str = "",
    model_name: str = "",
) -> Trajectory:
    """Rebuild qpos frames from a deploy-daemon dataset (see the module doc for the base-pose estimate).

    Args:
        root: dataset folder (``meta/info.json``, ``data/``).
        model: the task's compiled model (joint names are matched by name).
        default_qpos: (nq,) pose for joints the dataset lacks (default: ``model.qpos0``).

    Raises:
        TrajectoryError: no frames, no ``observation.state``, or joints unknown to the model.
    """
    from upright.dataset_io.lerobot import load_frames

    root = pathlib.Path(root)
    info = json.loads((root / "meta" / "info.json").read_text())
    feature = info.get("features", {}).get("observation.state")
    if feature is None or not feature.get("names"):
        raise TrajectoryError(f"replay={root}: the dataset has no observation.state with named entries")
    names: list[str] = list(feature["names"])
    try:
        table = load_frames(root)
    except FileNotFoundError:
        raise TrajectoryError(f"replay={root}: the dataset has no finished episodes (data/ is empty)") from None
    state = np.asarray(table.column("observation.state").to_pylist(), np.float64)
    episode = np.asarray(table.column("episode_index").to_pylist(), np.int64)
    fps = float(info["fps"])
    dt = 1.0 / fps
    frame_index = np.asarray(table.column("frame_index").to_pylist(), np.int64)

    col = {n: i for i, n in enumerate(names)}
    joint_cols, qadr = [], []
    for n in names:
        if n.startswith("q."):
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n[2:])
            if jid < 0:
                raise TrajectoryError(f"replay={root}: joint '{n[2:]}' is not in the task's model")
            joint_cols.append(col[n])
            qadr.append(int(model.jnt_qposadr[jid]))
    if not joint_cols:
        raise TrajectoryError(f"replay={root}: observation.state has no q.<joint> entries")
    grav_cols = [col.get(f"gravity.{a}") for a in "xyz"]
    gyro_cols = [col.get(f"gyro.{a}") for a in "xyz"]
    has_gravity, has_gyro = None not in grav_cols, None not in gyro_cols

    base = np.asarray(default_qpos if default_qpos is not None else model.qpos0, np.float64)
    data = mujoco.MjData(model)
    collide = np.flatnonzero(((model.geom_contype | model.geom_conaffinity) != 0) & (model.geom_bodyid > 0))
    qpos = np.tile(base, (len(state), 1))
    yaw = 0.0
    for t in range(len(state)):
        if t == 0 or episode[t] != episode[t - 1]:
            yaw = 0.0
        q = qpos[t]
        q[qadr] = state[t, joint_cols]
        tilt = quat_from_gravity(state[t, grav_cols]) if has_gravity else np.array([1.0, 0.0, 0.0, 0.0])
        quat = _quat_mul(np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]), tilt)
        if has_gyro:  # heading: integrate the world-z component of the body rate
            rot = np.empty(9)
            mujoco.mju_quat2Mat(rot, quat)
            yaw += float(rot.reshape(3, 3)[2] @ state[t, gyro_cols]) * dt
        q[0:3] = 0.0
        q[3:7] = quat
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        q[2] = -_lowest_point(model, data, collide)
    time = frame_index * dt
    note = (
        "deploy dataset: joint angles as logged; base pose estimated (roll/pitch from gravity, yaw from the "
        "integrated gyro, x/y fixed, height puts the lowest geom on the ground)"
        if has_gravity
        else "deploy dataset: joint angles as logged; base fixed upright (no gravity in the log)"
    )
    return Trajectory(
        qpos,
        dt,
        episode,
        time,
        task or info.get("upright", {}).get("task", ""),
        model_name or info.get("robot_type", ""),
        model_joint_names(model),
        {},
        note,
    )


def load_replay(path: str | pathlib.Path, model: mujoco.MjModel, default_qpos: np.ndarray | None = None) -> Trajectory:
    """Read ``replay=``: an ``.npz`` qpos trajectory or a deploy dataset folder, checked against ``model``.

    Raises:
        TrajectoryError: missing, unreadable, or recorded with another model.
    """
    p = pathlib.Path(path).expanduser()
    if not p.exists():
        raise TrajectoryError(
            f"replay={path}: no such file or folder (a .npz qpos trajectory or a deploy dataset folder)"
        )
    if p.is_dir():
        if not is_deploy_dataset(p):
            raise TrajectoryError(f"replay={path}: folder is not a LeRobot dataset (no meta/info.json)")
        traj = dataset_to_trajectory(p, model, default_qpos)
    else:
        traj = load_trajectory(p)
    check_fits_model(traj, model, where=f"replay={path}: ")
    return traj
