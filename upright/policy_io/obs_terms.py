"""The actor observation terms a deployed MLP policy may read, written once over a neutral robot reading.

A *reading* is any object with the attributes a term reads, each a (..., D) array of the robot's state:

- ``q``, ``dq``: (..., J) policy-joint positions (rad) and velocities (rad/s), in the policy's joint order;
- ``base_ang_vel``: (..., 3) pelvis angular velocity, base frame (the IMU gyro), rad/s;
- ``projected_gravity``: (..., 3) unit gravity in the base frame (from the IMU orientation);
- ``action``: (..., J) the last action applied;
- ``beta``: (...,) the action scale β.

The training env passes its batched :class:`~upright.tasks.standup.state.StandupState` (torch tensors, N rows); the
deploy daemon a one-row reading of numpy arrays (:class:`upright.deploy.observation.ObservationBuilder`). The terms use
plain attribute access and indexing only, so the same function gives the same values on both, and this module imports
neither torch nor numpy at import (it sits on the ground floor, which the robot computer's slim install imports; the
one term that stacks values, ``cube_orientation``, imports the library of the arrays it is given).

Each :class:`ObsTerm` carries its name (the metadata's ``observation_names`` entry), its width as a function of the
number of policy joints J, and the robot sensor behind it. A term function's docstring's first line (units and frame)
is the metadata's ``observation_descriptions`` entry (:func:`upright.tasks.metadata.first_line`): keep them as they
are, a file's metadata repeats them. Scales, noise, clip and history are the tasks' (:mod:`upright.tasks.standup`
``observations``, ``getup.observations``) and, on the robot, the policy file's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def base_ang_vel(state: Any) -> Any:
    """(N, 3) pelvis IMU angular velocity, base frame, rad/s."""
    return state.base_ang_vel


def projected_gravity(state: Any) -> Any:
    """(N, 3) unit gravity in the base frame (dimensionless)."""
    return state.projected_gravity


def joint_pos(state: Any) -> Any:
    """(N, J) absolute joint positions (not minus the default pose, as in HoST), rad."""
    return state.q


def joint_vel(state: Any) -> Any:
    """(N, J) joint velocities, rad/s."""
    return state.dq


def last_action(state: Any) -> Any:
    """(N, J) the action applied in the last env step (dimensionless)."""
    return state.action


def action_scale(state: Any) -> Any:
    """(N, 1) the action scale β."""
    return state.beta[..., None]


@dataclass(frozen=True)
class ObsTerm:
    """One actor observation term the daemon can build."""

    name: str
    """The metadata's ``observation_names`` entry."""
    func: Callable[[Any], Any]
    """``func(reading) -> (N, width) array`` (unscaled), for numpy arrays and torch tensors alike."""
    width: Callable[[int], int]
    """The term's width for J policy joints."""
    sensor: str
    """What on the robot gives it."""


def _width(n: int) -> Callable[[int], int]:
    """The width function of a term that has ``n`` values whatever the number of policy joints."""
    return lambda _num_joints: n


_three, _one = _width(3), _width(1)


def _per_joint(num_joints: int) -> int:
    return num_joints


TERMS: tuple[ObsTerm, ...] = (
    ObsTerm("base_ang_vel", base_ang_vel, _three, "pelvis IMU gyro"),
    ObsTerm("projected_gravity", projected_gravity, _three, "pelvis IMU orientation"),
    ObsTerm("joint_pos", joint_pos, _per_joint, "joint encoders"),
    ObsTerm("joint_vel", joint_vel, _per_joint, "joint encoders"),
    ObsTerm("last_action", last_action, _per_joint, "the policy's own previous output"),
    ObsTerm("action_scale", action_scale, _one, "the policy file's action_scale (no sensor)"),
)
"""Every term the daemon supports, in HoST's order."""

TERMS_BY_NAME: dict[str, ObsTerm] = {t.name: t for t in TERMS}
""":data:`TERMS` by name."""


def term_widths(names: tuple[str, ...] | list[str], num_joints: int) -> list[int]:
    """The width of each named term for ``num_joints`` policy joints.

    Raises:
        KeyError: a name that is not in :data:`TERMS_BY_NAME`.
    """
    return [TERMS_BY_NAME[n].width(num_joints) for n in names]


# ---------------------------------------------------------------------------------------------- the lift task's terms
# A lift reading (the Panda; world frame = the robot base, z up, m) has:
# - ``q``, ``dq``: (..., 9) the 7 arm joints (rad, rad/s) and both finger slides (m, m/s; finger_joint2 mirrors
#   finger_joint1), :data:`upright.robots.panda.JOINT_NAMES` order; ``home_q``: (..., 9) their home pose;
# - ``ctrl``: (..., 8) the commanded position targets of the 8 actuated joints (before gravity compensation);
# - ``gripper_pos``: (..., 3) the gripper site (forward kinematics of ``q``);
# - ``cube_pos``, ``cube_quat``: (..., 3) and (..., 4) the cube's centre and orientation (w, x, y, z), from a tracker;
# - ``target_pos``: (..., 3) where the cube is to go; ``action``: (..., A) the last action.


def _cat(parts: list) -> Any:
    """Concatenate (..., k) arrays along the last axis, numpy or torch alike (torch imported only for tensors)."""
    if type(parts[0]).__module__.startswith("torch"):
        import torch

        return torch.cat(parts, dim=-1)
    import numpy as np

    return np.concatenate(parts, axis=-1)


def joint_pos_rel(state: Any) -> Any:
    """(N, 9) joint positions minus the home pose: arm rad, fingers m."""
    return state.q - state.home_q


def ctrl_error(state: Any) -> Any:
    """(N, 8) position target minus joint position of each actuator (arm rad, finger m): where the PD pulls."""
    return state.ctrl - state.q[..., :8]


def gripper_pos(state: Any) -> Any:
    """(N, 3) gripper site position, world frame (robot base at the origin), m."""
    return state.gripper_pos


def gripper_to_cube(state: Any) -> Any:
    """(N, 3) cube centre minus gripper site, world frame, m."""
    return state.cube_pos - state.gripper_pos


def cube_to_target(state: Any) -> Any:
    """(N, 3) target minus cube centre, world frame, m."""
    return state.target_pos - state.cube_pos


def cube_orientation(state: Any) -> Any:
    """(N, 6) first two columns of the cube's rotation matrix (body-to-world; continuous 6-D representation)."""
    q = state.cube_quat
    w, x, y, z = q[..., 0:1], q[..., 1:2], q[..., 2:3], q[..., 3:4]
    return _cat(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y + w * z),
            2 * (x * z - w * y),
            2 * (x * y - w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z + w * x),
        ]
    )


LIFT_TERMS: tuple[ObsTerm, ...] = (
    ObsTerm("joint_pos", joint_pos_rel, _width(9), "joint encoders (the finger's for both slides)"),
    ObsTerm("joint_vel", joint_vel, _width(9), "joint encoders"),
    ObsTerm("ctrl_error", ctrl_error, _width(8), "the controller's own targets and the encoders"),
    ObsTerm("gripper_pos", gripper_pos, _three, "forward kinematics of the encoders"),
    ObsTerm("gripper_to_cube", gripper_to_cube, _three, "a cube tracker and forward kinematics of the encoders"),
    ObsTerm("cube_to_target", cube_to_target, _three, "a cube tracker and the operator's goal"),
    ObsTerm("cube_orientation", cube_orientation, _width(6), "a cube tracker"),
    ObsTerm("last_action", last_action, _per_joint, "the policy's own previous output"),
)
"""The lift task's terms, in its order (:mod:`upright.tasks.lift.observations`). ``last_action``'s width is the
action's (4 for ``ee_delta``): :func:`terms_for` gives the daemon's widths for a file."""

TRACKED_TERMS: tuple[str, ...] = ("gripper_to_cube", "cube_to_target", "cube_orientation")
"""Lift terms that need an object pose source on the robot (the daemon's ``--object-pose``)."""

TERMS_BY_TASK: dict[str, dict[str, ObsTerm]] = {
    "standup": TERMS_BY_NAME,
    "lift": {t.name: t for t in LIFT_TERMS},
}
"""Each task's terms by name: the same name may mean another thing in another task (lift's ``joint_pos`` is relative
to home and includes the fingers)."""


def terms_for(action_mode: str) -> dict[str, ObsTerm]:
    """The terms, by name, of a policy file with this ``action_mode``: the lift task's for ``ee_delta`` (the one mode
    of a lift MLP file the daemon runs), else the G1's (:data:`TERMS`). Keyed by the mode, not by the spec's ``task``,
    which for a chunked policy is the operator's instruction."""
    return TERMS_BY_TASK["lift"] if action_mode == "ee_delta" else TERMS_BY_NAME
