"""What the controller catches from a policy: :class:`PolicyFault`.

MLP policy files run through :class:`upright.policy_io.mlp.OnnxPolicy`, chunked (VLA) policies through
:class:`~upright.deploy.chunk_runner.ChunkRunner`; both are callables the controller calls once per policy tick.
"""

from __future__ import annotations


class PolicyFault(RuntimeError):
    """The policy cannot produce actions any more (e.g. a chunked policy's inference worker raised). The controller
    sends the robot to DAMPING with this exception's message (one line) as the reason."""
