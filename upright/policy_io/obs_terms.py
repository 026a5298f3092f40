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
neither torch nor numpy (it sits on the ground floor, which the robot computer's slim install imports).

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


def _three(_num_joints: int) -> int:
    return 3


def _one(_num_joints: int) -> int:
    return 1


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
