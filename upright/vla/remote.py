"""A :class:`~upright.vla.policy.ChunkPolicy` that runs on a policy server: openpi's websocket protocol, client side.

The server is ``upright-policy-server`` (:mod:`upright.vla.server`) or openpi's own
(``scripts/serve_policy.py`` of Physical-Intelligence/openpi, e.g. pi0 / pi0-FAST / pi05 on a GPU machine), so a
large model served elsewhere can be the base policy of play, evaluation, residual RL (``policy.base=ws://HOST:PORT``)
or deploy. Each batch row goes out as one openpi observation (reverse key map,
:func:`~upright.vla.keymap.batch_to_observations`); the (H, A) replies are stacked to (B, H, A) in row order.

The protocol has no batches, so a batch's requests are pipelined: up to ``max_in_flight`` requests are sent on a
connection before its first reply is read (a websocket keeps the order, and openpi's server, like ours, answers a
connection's requests one after the other), and the rows can be spread over ``connections`` websocket connections.
No round trip is waited for per row, and ``upright-policy-server`` answers the requests it has already received in one
policy call (``--max-batch``, :mod:`upright.vla.server`). ``max_in_flight=1, connections=1`` is one round trip per row.

openpi's servers send model-specific metadata that usually lacks ``chunk_size`` and ``action_dim``: give them to the
constructor then (openpi's LIBERO configs: ``action_horizon``, and 7 actions after the output transforms).

A server started with an API key (``upright-policy-server --api-key``) needs it: ``api_key=`` (default
``$UPRIGHT_POLICY_SERVER_API_KEY``) is sent as ``Authorization: Api-Key <key>``, as openpi-client does.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping

import numpy as np
import torch
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection, connect

from upright.policy_io.residual_base import parse_ws_url
from upright.vla import wire
from upright.vla.keymap import DEFAULT_KEY_MAP, batch_to_observations, check_key_map
from upright.vla.policy import ACTION_CONVENTIONS, ChunkPolicy, PolicyBatch
from upright.vla.server_guard import API_KEY_ENV


def _auth_headers(api_key: str | None) -> dict | None:
    """openpi-client's handshake header for an API key (``api_key`` None: ``$UPRIGHT_POLICY_SERVER_API_KEY``)."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Api-Key {key}"} if key else None


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
        max_in_flight: requests sent on a connection before its oldest reply is read (>= 1; 1: a round trip per row).
        connections: websocket connections a batch's rows are spread over (>= 1; contiguous blocks, in order).
        api_key: the server's API key (``Authorization: Api-Key <key>``); None: ``$UPRIGHT_POLICY_SERVER_API_KEY``
            if set, else none.

    Attributes:
        metadata: the server's metadata dict (sent on connect; the same on every connection).
        url: ``ws://host:port``.
        last_server_timing: the ``server_timing`` of the last reply (``infer_ms``, ``prev_total_ms``; ms).

    Raises:
        ConnectionError: no server answers at ``host:port`` (the message says how to start one), or it refuses the
            API key (HTTP 401/403).
        ValueError: chunk size, action dim or convention unknown or contradicting the server's metadata;
            ``max_in_flight`` or ``connections`` < 1.
    """

    predict_needed_rows_only = True  # each row is a request: select_action asks only for the envs that need a chunk

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        key_map: Mapping[str, str] = DEFAULT_KEY_MAP,
        chunk_size: int | None = None,
        action_dim: int | None = None,
        action_convention: str | None = None,
        timeout: float = 30.0,
        n_action_steps: int | None = None,
        temporal_ensemble_coeff: float | None = None,
        max_in_flight: int = 256,
        connections: int = 1,
        api_key: str | None = None,
    ):
        if int(max_in_flight) < 1 or int(connections) < 1:
            raise ValueError(
                f"RemotePolicy: max_in_flight and connections must be >= 1, got {max_in_flight} and {connections}"
            )
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.url = f"ws://{self.address}"
        self.key_map = check_key_map(key_map)
        self.timeout = timeout
        self.max_in_flight, self.n_connections = int(max_in_flight), int(connections)
        self.n_action_steps, self.temporal_ensemble_coeff = n_action_steps, temporal_ensemble_coeff
        self.last_server_timing: dict = {}
        self._conns: list[ClientConnection] = []
        hint = (
            f"start one with `upright-policy-server --policy MODULE:FACTORY --port {port}` (or openpi's "
            f"scripts/serve_policy.py) and check host and port"
        )
        try:
            for _ in range(self.n_connections):
                # max_queue=None: replies are buffered while requests are still being sent (no flow-control deadlock)
                ws = connect(
                    self.url,
                    compression=None,
                    max_size=None,
                    max_queue=None,
                    open_timeout=timeout,
                    additional_headers=_auth_headers(api_key),
                )
                self._conns.append(ws)
                self.metadata = wire.unpackb(ws.recv(timeout=timeout))
        except InvalidStatus as e:
            self.close()
            status = e.response.status_code
            if status in (401, 403):
                raise ConnectionError(
                    f"the policy server at {self.url} refused the connection (HTTP {status}: "
                    f"{'no API key sent' if status == 401 else 'wrong API key'}); pass "
                    f"api_key=... or set ${API_KEY_ENV}"
                ) from None
            raise ConnectionError(f"no openpi policy server at {self.url} ({type(e).__name__}: {e}); {hint}") from None
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as e:
            self.close()
            raise ConnectionError(f"no openpi policy server at {self.url} ({type(e).__name__}: {e}); {hint}") from None
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
            raise ValueError(
                f"the server at {self.address} does not announce '{name}' (openpi servers send "
                f"model-specific metadata: {sorted(self.metadata)}); pass RemotePolicy(..., {name}=...)"
            )
        return value

    @classmethod
    def from_url(cls, url: str, label: str = "policy", **kwargs) -> RemotePolicy:
        """``RemotePolicy(host, port, **kwargs)`` from ``ws://HOST:PORT``; ``label`` names the setting in the error.

        Raises:
            ValueError: not a ``ws://HOST:PORT`` address; and as the constructor.
        """
        host, port = parse_ws_url(url, label)
        return cls(host, port, **kwargs)

    @property
    def _ws(self) -> ClientConnection | None:
        """The first connection (None once closed)."""
        return self._conns[0] if self._conns else None

    def predict_action_chunk(self, batch: PolicyBatch) -> torch.Tensor:
        """(B, H, A) float32 chunk: one request per batch row, pipelined (module docstring); row i of the result
        answers row i of the batch.

        Raises:
            ValueError: a bad batch, or a reply whose actions are not (chunk_size, action_dim).
            RuntimeError: the server answered a request with an error (its message; the first such row's).
            ConnectionError: the connection was lost or the server did not answer within ``timeout``.
        """
        if not self._conns:
            raise ConnectionError(f"RemotePolicy({self.address}) is closed; create a new one")
        source = f"policy server at {self.address}"
        messages = [wire.packb(obs) for obs in batch_to_observations(batch, self.key_map)]
        n, k = len(messages), len(self._conns)
        # contiguous blocks of rows per connection: todo[c] the rows connection c has still to send, waiting[c] those
        # sent and not yet answered (a connection's replies come in the order of its requests)
        bounds = [round(c * n / k) for c in range(k + 1)]
        todo = [deque(range(bounds[c], bounds[c + 1])) for c in range(k)]
        waiting = [deque() for _ in range(k)]
        chunks: list[np.ndarray | None] = [None] * n
        error: Exception | None = None
        try:
            while any(todo) or any(waiting):
                for c, ws in enumerate(self._conns):
                    while todo[c] and len(waiting[c]) < self.max_in_flight:
                        i = todo[c].popleft()
                        ws.send(messages[i])
                        waiting[c].append(i)
                for c, ws in enumerate(self._conns):
                    if not waiting[c]:
                        continue
                    i = waiting[c].popleft()
                    message = ws.recv(timeout=self.timeout)
                    try:  # every reply is read even after an error, so the connection stays in step
                        chunks[i] = self._actions(message, source)
                    except (RuntimeError, ValueError) as e:
                        error = error or e
        except (ConnectionClosed, TimeoutError) as e:
            self.close()  # a late reply would answer the next request
            if error is not None:  # openpi's server closes the connection after sending its traceback
                raise error from None
            raise ConnectionError(
                f"{source}: connection lost or no reply within {self.timeout} s "
                f"({type(e).__name__}: {e}); create a new RemotePolicy"
            ) from None
        if error is not None:
            raise error
        return torch.from_numpy(np.stack(chunks)) if n else torch.zeros(0, self.chunk_size, self.action_dim)

    def _actions(self, message, source: str) -> np.ndarray:
        """(H, A) float32 of one reply (:func:`wire.actions_from_reply`), its shape checked; notes its timing."""
        actions, reply = wire.actions_from_reply(message, source)
        if actions.shape != (self.chunk_size, self.action_dim):
            raise ValueError(
                f"{source} replied actions of shape {actions.shape}, expected "
                f"({self.chunk_size}, {self.action_dim}); check chunk_size / action_dim"
            )
        self.last_server_timing = reply.get("server_timing", {})
        return actions

    def close(self) -> None:
        """Close the connections (idempotent)."""
        conns, self._conns = self._conns, []
        for ws in conns:
            ws.close()

    def __enter__(self) -> RemotePolicy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fetch_metadata(url: str, timeout: float = 30.0, api_key: str | None = None) -> dict:
    """The metadata a policy server at ``ws://HOST:PORT`` sends on connect (one connection, opened and closed);
    ``api_key`` as :class:`RemotePolicy`'s.

    Raises:
        ValueError: not a ``ws://HOST:PORT`` address, or metadata that is not a dict.
        ConnectionError: no server answers (as :class:`RemotePolicy`).
    """
    host, port = parse_ws_url(url, label="server")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with connect(
            f"ws://{address}",
            compression=None,
            max_size=None,
            open_timeout=timeout,
            additional_headers=_auth_headers(api_key),
        ) as ws:
            metadata = wire.unpackb(ws.recv(timeout=timeout))
    except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as e:
        raise ConnectionError(f"no openpi policy server at ws://{address} ({type(e).__name__}: {e})") from None
    if not isinstance(metadata, dict):
        raise ValueError(f"the server at {address} sent {type(metadata).__name__} metadata, not a dict")
    return metadata
