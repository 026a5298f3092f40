"""Vision-language-action (VLA) policies and their fine-tuning hooks (issue 15).

One interface for chunked, language-conditioned policies (:class:`~upright.vla.policy.ChunkPolicy`, after LeRobot's
``PreTrainedPolicy``), an action-chunk queue with ACT's temporal ensembling shared by play, evaluation and deploy
(:class:`~upright.vla.chunking.ActionChunkQueue`), and implementations: a small built-in VLA trained by behaviour
cloning, a client of the openpi websocket protocol, and a LeRobot adapter.
"""

from upright.vla.chunking import ActionChunkQueue
from upright.vla.policy import ChunkPolicy, PolicyBatch, validate_batch

__all__ = ["ActionChunkQueue", "ChunkPolicy", "PolicyBatch", "validate_batch"]
