"""ONNX-metadata blocks every task writes the same way (:mod:`upright.policy_io.schema` lists the keys).

A task's metadata builder (:func:`upright.tasks.registry.policy_metadata` for standup,
:func:`upright.tasks.lift.metadata.lift_policy_metadata`) adds its robot, action and episode keys to these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from upright.managers.observation import ObservationTerm
from upright.policy_io.schema import HISTORY_LAYOUT

POLICY_IO: dict[str, str] = {
    "observation_normalizer": "included in the graph",
    "input_name": "obs",
    "output_name": "actions",
}
"""How the exported graph is called (:mod:`upright.training.onnx_export`): input ``obs`` (1, observation_dim) float32,
output ``actions``; the empirical observation normaliser is part of the graph."""


def first_line(doc: str | None) -> str:
    """The first line of a docstring ("" if none): a term's ``observation_descriptions`` entry."""
    return doc.strip().splitlines()[0] if doc and doc.strip() else ""


def observation_metadata(
    terms: Sequence[ObservationTerm],
    dims: Sequence[int],
    history_length: int,
    clip: float,
    robot_measurable: Mapping[str, str],
) -> dict[str, Any]:
    """The observation keys of a policy whose input is ``history_length`` whole frames of ``terms``, oldest first.

    Args:
        terms: the observation terms in frame order (:class:`~upright.managers.observation.ObservationTerm`).
        dims: width of each term (the frame is ``sum(dims)`` values).
        history_length: frames stacked H (1: the current frame only).
        clip: frames are clipped to ±clip.
        robot_measurable: term name -> what on the robot provides it; any other term is a privileged input.

    Returns:
        ``observation_names``, ``observation_dims``, ``observation_scales``, ``observation_descriptions`` (the first
        line of each term function's docstring), ``observation_noise``, ``observation_history_length``,
        ``observation_history_order``, ``history_layout``, ``observation_frame_dim``, ``observation_dim``
        (H x frame), ``observation_clip`` and ``privileged_inputs``.
    """
    frame = int(sum(dims))
    return {
        "observation_names": [t.name for t in terms],
        "observation_dims": list(dims),
        "observation_scales": [t.scale for t in terms],
        "observation_descriptions": [first_line(t.func.__doc__) for t in terms],
        "observation_noise": [t.noise for t in terms],
        "observation_history_length": history_length,
        "observation_history_order": "oldest_first",
        "history_layout": HISTORY_LAYOUT,
        "observation_frame_dim": frame,
        "observation_dim": history_length * frame,
        "observation_clip": clip,
        "privileged_inputs": [t.name for t in terms if t.name not in robot_measurable],
    }
