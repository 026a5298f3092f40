"""What a vision-language-action policy is told and sees of the lift task, besides its camera images: the instruction
(:data:`TASK`, with :data:`PARAPHRASES`) and the proprioceptive ``observation.state`` (:func:`proprio_state`). The
demonstrations (:mod:`upright.training.record_demos`), the VLA evaluation, residual RL and the policy server use the
same ones."""

from __future__ import annotations

import numpy as np

TASK = "Pick up the green cube and lift it to the red target."
"""The instruction string stored with every episode."""
PARAPHRASES = (
    TASK,
    "Lift the green cube up to the red target.",
    "Grab the green block and raise it to the red marker.",
    "Pick the cube up and bring it to the red sphere.",
    "Move the green cube to the red target above the table.",
)
"""Phrasings of :data:`TASK` that ``--paraphrases`` cycles through (one per episode)."""


def proprio_state(env) -> np.ndarray:
    """(N, 22) float32 ``observation.state`` of every env of a lift env: q and q̇ of the 8 actuated joints (rad, m;
    rad/s, m/s), the base gyro (0: the Panda's base is fixed) and gravity in the base frame ((0, 0, -1))."""
    state = env.state
    q = state.q[:, :8].cpu().numpy().astype(np.float32)
    dq = state.dq[:, :8].cpu().numpy().astype(np.float32)
    n = q.shape[0]
    fixed = np.tile(np.array([0.0, 0.0, 0.0, 0.0, 0.0, -1.0], np.float32), (n, 1))
    return np.concatenate([q, dq, fixed], axis=1)
