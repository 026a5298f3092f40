"""A :class:`~upright.vla.policy.ChunkPolicy` that runs on a policy server: openpi's websocket protocol, client side.

The server is ``upright-policy-server`` (:mod:`upright.vla.server`) or openpi's own
(``scripts/serve_policy.py`` of Physical-Intelligence/openpi, e.g. pi0 / pi0-FAST / pi05 on a GPU machine), so a
large model served elsewhere can be the base policy of play, evaluation or deploy. Each batch row goes out as one
openpi observation (reverse key map, :func:`~upright.vla.keymap.batch_to_observations`); the (H, A) replies are
stacked to (B, H, A), in order, one round trip per row.

openpi's servers send model-specific metadata that usually lacks ``chunk_size`` and ``action_dim``: give them to the
constructor then (openpi's LIBERO configs: ``action_horizon``, and 7 actions after the output transforms).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from upright.vla import wire
from upright.vla.keymap import DEFAULT_KEY_MAP, batch_to_observations, check_key_map
from upright.vla.policy import ACTION_CONVENTIONS, ChunkPolicy, PolicyBatch


class RemotePolicy(ChunkPolicy):
    """Client of an openpi policy server (module docstring); close it (or use ``with``) when done.

    Args:
        host: server address (default 127.0.0.1).
        port: server port (default 8000, openpi's).
        key_map: openpi key -> LeRobot key, the server's (:data:`~upright.vla.keymap.DEFAULT_KEY_MAP`).
        chunk_size, action_dim, action_convention: H, A and ``"delta"``/``"absolute"``; read from the server's
            metadata when it has them (an upright server always does); given both ways, they must agree.
        timeout: seconds to connect and to wait for each reply.
        n_action_steps, temporal_ensemble_coeff: how :meth:`select_action` executes chunks (:class:`ChunkPolicy`).

    Attributes:
        metadata: the server's metadata dict.
        last_server_timing: the ``server_timing`` of the last reply (``infer_ms``, ``prev_total_ms``; ms).

    Raises:
        ConnectionError: no server answers at ``host:port`` (the message says how to start one).
        ValueError: chunk size, action dim or convention unknown or contradicting the server's metadata.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, key_map: Mapping[str, str] = DEFAULT_KEY_MAP,
                 chunk_size: int | None = None, action_dim: int | None = None, action_convention: str | None = None,
                 timeout: float = 30.0, n_action_steps: int | None = None,
                 temporal_ensemble_coeff: float | None = None):
        self.address = f"{host}:{port}"
        self.key_map = check_key_map(key_map)
        self.timeout = timeout
        self.n_action_steps, self.temporal_ensemble_coeff = n_action_steps, temporal_ensemble_coeff
        self.last_server_timing: dict = {}
        self._ws: ClientConnection | None = None
        hint = (f"start one with `upright-policy-server --policy MODULE:FACTORY --port {port}` (or openpi's "
                f"scripts/serve_policy.py) and check host and port")
        try:
            self._ws = connect(f"ws://{self.address}", compression=None, max_size=None, open_timeout=timeout)
            self.metadata = wire.unpackb(self._ws.recv(timeout=timeout))
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as e:
            self.close()
            raise ConnectionError(f"no openpi policy server at ws://{self.address} ({type(e).__name__}: {e}); "
                                  f"{hint}") from None
        if not isinstance(self.metadata, dict):
            self.close()
            raise ValueError(f"the server at {self.address} sent {type(self.metadata).__name__} metadata, not a dict")
        self.chunk_size = self._setting("chunk_size", chunk_size)
        self.action_dim = self._setting("action_dim", action_dim)
        self.action_convention = self._setting("action_convention", action_convention, default="delta")
        if self.action_convention not in ACTION_CONVENTIONS:
            raise ValueError(f"action_convention must be one of {ACTION_CONVENTIONS}, got {self.action_convention!r}")

    def _setting(self, name: str, given, default=None):
        served = self.metadata.get(name)
        if given is not None and served is not None and given != served:
            self.close()
            raise ValueError(f"{name}={given!r} given, but the server at {self.address} serves {name}={served!r}")
        value = given if given is not None else served if served is not None else default
        if value is None:
            self.close()
            raise ValueError(f"the server at {self.address} does not announce '{name}' (openpi servers send "
                             f"model-specific metadata: {sorted(self.metadata)}); pass RemotePolicy(..., {name}=...)")
        return value

    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 chunk: one request per batch row, in order.

        Raises:
            ValueError: a bad batch, or a reply whose actions are not (chunk_size, action_dim).
            RuntimeError: the server answered with an error (its message).
            ConnectionError: the connection was lost or the server did not answer within ``timeout``.
        """
        if self._ws is None:
            raise ConnectionError(f"RemotePolicy({self.address}) is closed; create a new one")
        source = f"policy server at {self.address}"
        chunks = []
        for obs in batch_to_observations(batch, self.key_map):
            try:
                self._ws.send(wire.packb(obs))
                message = self._ws.recv(timeout=self.timeout)
            except (ConnectionClosed, TimeoutError) as e:
                self.close()  # a late reply would answer the next request
                raise ConnectionError(f"{source}: connection lost or no reply within {self.timeout} s "
                                      f"({type(e).__name__}: {e}); create a new RemotePolicy") from None
            actions, reply = wire.actions_from_reply(message, source)
            if actions.shape != (self.chunk_size, self.action_dim):
                raise ValueError(f"{source} replied actions of shape {actions.shape}, expected "
                                 f"({self.chunk_size}, {self.action_dim}); check chunk_size / action_dim")
            self.last_server_timing = reply.get("server_timing", {})
            chunks.append(actions)
        return torch.from_numpy(np.stack(chunks))

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def __enter__(self) -> RemotePolicy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
