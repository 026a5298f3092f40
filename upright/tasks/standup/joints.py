"""Resolve policy-joint names to indices on the state's J axis.

Reward/observation terms select joint subsets by NAME (never hard-coded integers); this module turns
names or regular expressions into indices into :data:`upright.robots.g1.POLICY_JOINT_NAMES`, the order
of the J axis of :class:`upright.tasks.standup.state.StandupState`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from upright.robots.g1 import POLICY_JOINT_NAMES


def joint_ids(patterns: str | Sequence[str], names: Sequence[str] = POLICY_JOINT_NAMES) -> list[int]:
    """Indices of the joints whose names fully match the given regular expressions.

    Args:
        patterns: one regex or a sequence of them, each matched with ``re.fullmatch`` (a plain joint
            name matches itself).
        names: the joint order to index into; default the 23 policy joints.

    Returns:
        Indices in pattern order; within one pattern, in ``names`` order. A joint matched by several
        patterns is listed once (at its first match), so ``joint_ids(["left_.*", "right_.*"])``
        gives left joints then right joints.

    Raises:
        ValueError: a pattern matches no joint.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    ids: list[int] = []
    for pattern in patterns:
        matched = [i for i, name in enumerate(names) if re.fullmatch(pattern, name)]
        if not matched:
            raise ValueError(f"Joint pattern '{pattern}' matches none of {list(names)}")
        ids += [i for i in matched if i not in ids]
    return ids
