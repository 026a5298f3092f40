"""The lift task's actor/critic observation (49 values per env step) as named terms of
:class:`upright.managers.observation.ObservationTerm`.

Each term but ``ee_lead`` is a neutral function of :mod:`upright.policy_io.obs_terms` (its ``LIFT_TERMS``), which the
deploy daemon evaluates on its robot reading, so the env and the robot compute the same values.

Issue 14's observation: proprioception, the gripper-cube vector, the cube-target vector, the cube orientation and
the last action; plus, as in MuJoCo Playground's ``PandaPickCube._get_obs`` (``mujoco_playground/_src/manipulation/
franka_emika_panda/pick.py``), the gripper position and the position-target error ``ctrl - q``. Noise half-widths
(applied with ``env.domain_rand.obs_noise_scale``; 0 in evaluation without randomisation) are upright's choice:
encoder-level noise on joints, 5 mm on positions that a camera-based cube tracker would provide.
"""

from __future__ import annotations

import torch

from upright.managers.observation import ObservationTerm
from upright.policy_io.obs_terms import (
    ctrl_error,
    cube_orientation,
    cube_to_target,
    gripper_pos,
    gripper_to_cube,
    joint_pos_rel,
    joint_vel,
    last_action,
)
from upright.tasks.lift.state import LiftState


def ee_lead(state: LiftState) -> torch.Tensor:
    """(N, 3) commanded gripper site (forward kinematics of the arm's position targets) minus the measured site, world
    frame, m: how far the command runs ahead of the hand.

    Raises:
        ValueError: the state has no ``command_site`` (the env was built without ``env.ee_observe_lead=true``).
    """
    if state.command_site is None:
        raise ValueError(
            "the ee_lead observation needs the commanded site: build the env with env.ee_observe_lead=true"
        )
    return state.command_site - state.gripper_pos


EE_LEAD_TERM = ObservationTerm("ee_lead", ee_lead, 1.0, 0.002)
"""The optional lead term (``env.ee_observe_lead``), appended after :data:`OBSERVATION_TERMS`; 2 mm noise, as
``gripper_pos``. The IK integrates the policy's steps on the targets, so a blocked hand winds the command up (30 cm
below and 15 cm behind the hand in session 14's stuck far-edge episodes, ``docs/lift_learning.md``); this term makes
that integral visible instead of bounding it (``env.ee_max_lead``)."""

OBSERVATION_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm("joint_pos", joint_pos_rel, 1.0, 0.005),
    ObservationTerm("joint_vel", joint_vel, 0.1, 0.1 * 0.1),  # ±0.1 rad/s raw
    ObservationTerm("ctrl_error", ctrl_error, 1.0, 0.0),
    ObservationTerm("gripper_pos", gripper_pos, 1.0, 0.002),
    ObservationTerm("gripper_to_cube", gripper_to_cube, 1.0, 0.005),
    ObservationTerm("cube_to_target", cube_to_target, 1.0, 0.005),
    ObservationTerm("cube_orientation", cube_orientation, 1.0, 0.02),
    ObservationTerm("last_action", last_action, 1.0, 0.0),
)
"""Terms in order, with scale and noise half-width (of the scaled value)."""

OBSERVATION_DIMS: tuple[int, ...] = (9, 9, 8, 3, 3, 3, 6, 8)
"""Width of each term (49 in all) with ``env.action_mode=delta``; :func:`observation_dims` in general."""


def observation_dims(num_actions: int = 8, ee_lead: bool = False) -> tuple[int, ...]:
    """Width of each term when the policy's action has ``num_actions`` values (8: ``delta``, 49 in all;
    4: ``ee_delta``, 45 in all): only ``last_action`` depends on it; ``ee_lead`` appends the lead term's 3."""
    return OBSERVATION_DIMS[:-1] + (int(num_actions),) + ((3,) if ee_lead else ())


def observation_terms(ee_lead: bool = False) -> tuple[ObservationTerm, ...]:
    """The frame's terms in order: :data:`OBSERVATION_TERMS`, then :data:`EE_LEAD_TERM` with ``ee_lead``."""
    return OBSERVATION_TERMS + ((EE_LEAD_TERM,) if ee_lead else ())


HISTORY_LENGTH = 1
"""Frames per observation (Playground uses the current one only)."""

OBS_CLIP = 100.0
"""Frames are clipped to ±100."""

ROBOT_MEASURABLE_TERMS: dict[str, str] = {
    "joint_pos": "joint encoders",
    "joint_vel": "joint encoders",
    "ctrl_error": "the controller's own targets and the encoders",
    "gripper_pos": "forward kinematics of the encoders",
    "last_action": "the policy's own previous output",
    "ee_lead": "forward kinematics of the controller's own targets and of the encoders",
}
"""Terms a robot measures by itself; the others need a cube and target estimate (listed as privileged inputs)."""
