"""Left/right mirror of the get-up MDP's observations and actions (the G1's sagittal plane, x-z of the pelvis frame).

rsl-rl's symmetry data augmentation (Mittal et al., "Symmetry Considerations for Learning Task Symmetric Robot
Policies", ICRA 2024; ``rsl_rl/extensions/symmetry.py``) adds to every PPO mini-batch the mirror image of each sample:
the observation the robot would make in the mirrored state, and the mirrored action. The get-up is left/right
symmetric (the drop orientation, the floor, the rewards), so a mirrored sample is a sample of the same MDP.

The mirror of the robot's state through its sagittal plane (y -> -y in the pelvis frame):

- a polar vector in a body frame (projected gravity, linear velocity): (x, y, z) -> (x, -y, z);
- an axial vector (angular velocity): (x, y, z) -> (-x, y, -z);
- joints: left and right swap; a joint whose axis lies along the body's x or z (roll, yaw) changes sign, one along
  y (pitch, knee, elbow) keeps it. In the G1's MJCF (``unitree_g1/g1_mjlab.xml``) each left joint and its right
  twin share the axis vector, so this holds for every joint angle, velocity and PD-target offset (the relative
  action) of :data:`upright.robots.g1.POLICY_JOINT_NAMES`. HoST's default pose and the observation's zero are
  mirror-symmetric (roll and yaw 0), so absolute and relative joint positions mirror alike.

``tests/tasks/test_getup_symmetry.py`` checks every term against the simulator: the observation of the mirrored
state equals the mirror of the observation.
"""

from __future__ import annotations

import re

import torch

from upright.robots.g1 import POLICY_JOINT_NAMES

SIGN_FLIP_JOINTS = re.compile(r".*_(roll|yaw)_joint")
"""Joints whose axis lies along the body's x (roll) or z (yaw): their angle changes sign in the mirror."""

TERM_KIND: dict[str, str] = {
    "base_ang_vel": "axial",
    "projected_gravity": "polar",
    "torso_projected_gravity": "polar",
    "base_lin_vel": "polar",
    "joint_pos": "joints",
    "joint_pos_rel": "joints",
    "joint_vel": "joints",
    "last_action": "joints",
}
"""How each get-up observation term (:mod:`.observations`) mirrors."""


def joint_mirror(names: tuple[str, ...] = POLICY_JOINT_NAMES) -> tuple[torch.Tensor, torch.Tensor]:
    """Index and sign of the mirror over joints ``names``: ``mirrored[:, i] = sign[i] * x[:, index[i]]``.

    Returns:
        (index (J,) int64, sign (J,) float32).

    Raises:
        ValueError: a ``left_``/``right_`` joint whose twin is not in ``names``.
    """
    index, sign = [], []
    for name in names:
        twin = name
        if name.startswith("left_"):
            twin = "right_" + name[len("left_") :]
        elif name.startswith("right_"):
            twin = "left_" + name[len("right_") :]
        if twin not in names:
            raise ValueError(f"joint_mirror: joint '{name}' has no twin '{twin}' among the joints")
        index.append(names.index(twin))
        sign.append(-1.0 if SIGN_FLIP_JOINTS.fullmatch(name) else 1.0)
    return torch.tensor(index, dtype=torch.long), torch.tensor(sign, dtype=torch.float32)


def layout_mirror(terms: tuple[tuple[str, int], ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Index and sign of the mirror over a concatenated observation of ``terms`` ((name, width) in order).

    Returns:
        (index (D,) int64, sign (D,) float32) with ``mirrored[:, k] = sign[k] * obs[:, index[k]]``.

    Raises:
        ValueError: a term :data:`TERM_KIND` does not know, or a width that does not fit its kind.
    """
    j_index, j_sign = joint_mirror()
    index, sign, start = [], [], 0
    for name, width in terms:
        kind = TERM_KIND.get(name)
        if kind is None:
            raise ValueError(f"layout_mirror: no mirror known for observation term '{name}'; add it to TERM_KIND")
        if kind == "joints":
            if width != j_index.numel():
                raise ValueError(f"layout_mirror: term '{name}' has width {width}, expected {j_index.numel()} joints")
            index.append(start + j_index)
            sign.append(j_sign)
        else:
            if width != 3:
                raise ValueError(f"layout_mirror: term '{name}' has width {width}, expected a 3-vector")
            index.append(start + torch.arange(3))
            sign.append(torch.tensor([1.0, -1.0, 1.0] if kind == "polar" else [-1.0, 1.0, -1.0]))
        start += width
    return torch.cat(index), torch.cat(sign)


def mirror(x: torch.Tensor, index: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """(B, D) ``x`` mirrored with ``index``/``sign`` from :func:`layout_mirror` or :func:`joint_mirror`."""
    return x[:, index.to(x.device)] * sign.to(x.device, x.dtype)
