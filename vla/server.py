"""Serving a :class:`~upright.vla.policy.ChunkPolicy` over openpi's websocket protocol (``upright-policy-server``).

Any openpi client (``openpi_client.websocket_client_policy.WebsocketClientPolicy``, or our
:class:`~upright.vla.remote.RemotePolicy`) can use the policy: on connect the server sends its metadata (chunk size,
action dim, action convention, the observation keys it reads; :func:`policy_metadata`); each request is one openpi
observation, mapped to a LeRobot batch of size 1 (:mod:`upright.vla.keymap`), and each reply is
``{"actions": (H, A) float32, "server_timing": {"infer_ms": ..., "prev_total_ms": ...}}`` (openpi's timing keys; ms;
``infer_ms`` is the time of the policy call that answered the request, with the others batched with it).

Batching: the protocol is one observation per request, but a client may pipeline (send requests before the replies
to earlier ones arrive, as :class:`~upright.vla.remote.RemotePolicy` does for a batch). The requests a connection has
already received, up to ``max_batch`` (``--max-batch``, default :data:`DEFAULT_MAX_BATCH`), are answered by one
``predict_action_chunk`` call on their stacked batch and replied to in order; requests whose keys or shapes differ go
in separate calls. A client sending one request at a time (openpi's) gets batches of 1, as from openpi's server.
``--max-batch 1`` answers every request alone. The policy's ``predict_action_chunk`` must treat the rows of a batch
independently (the :class:`~upright.vla.policy.ChunkPolicy` contract; its chunk queue is client-side).

Errors: a bad request (undecodable, a missing or malformed key, a shape the policy refuses: any ``ValueError``) is
answered with a one-line text frame ``"bad request: ..."`` and logged; the connection stays open for the next request
(openpi's client raises ``RuntimeError`` on a text frame and can go on). Any other exception of the policy is
handled as openpi's ``WebsocketPolicyServer`` does: the traceback goes to the client as a text frame, the connection
closes with code 1011, and it is logged; the server keeps accepting connections. ``GET /healthz`` answers 200.

The server binds 127.0.0.1 by default (this machine only); ``host="0.0.0.0"`` serves every interface, with no
authentication: use it on a trusted network only. Policy calls run one at a time on the event loop (as in openpi):
several connections are served in turn, each batch of one connection's requests in one call.
"""

from __future__ import annotations

import argparse
import asyncio
import http
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping

import numpy as np
import torch
from websockets.asyncio.server import ServerConnection, serve as ws_serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from upright.vla import wire
from upright.vla.keymap import DEFAULT_KEY_MAP, check_key_map, observation_to_batch, parse_key_map
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, TASK_KEY, ChunkPolicy

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_BATCH = 256
"""Most pipelined requests of one connection answered by one policy call (module docstring)."""

DESCRIPTION_KEYS = ("state_dim", "state_key", "image_height", "image_width")
"""Optional metadata keys, sent when the policy declares them (as attributes, in a ``cfg`` like TinyVLA's, or in a
``metadata`` dict like OnnxChunkPolicy's); ``state_key`` is the lift feature the policy's ``observation.state`` holds
(``observation.state``: the 22-value proprioceptive state, ``observation.policy_obs``: the env's 49-value
observation), which residual RL on a remote base needs (:mod:`upright.vla.residual`)."""


def _declared(policy: ChunkPolicy, key: str):
    """``key`` as the policy declares it: its attribute, its ``cfg``'s, or its ``metadata`` dict's (None if none)."""
    value = getattr(policy, key, None)
    if value is None:
        value = getattr(getattr(policy, "cfg", None), key, None)
    meta = getattr(policy, "metadata", None)
    if value is None and isinstance(meta, Mapping):
        value = meta.get(key)
    return value


def policy_metadata(policy: ChunkPolicy, key_map: Mapping[str, str] = DEFAULT_KEY_MAP,
                    max_batch: int = DEFAULT_MAX_BATCH) -> dict:
    """The metadata sent on connect: ``chunk_size``, ``action_dim``, ``action_convention``, ``observation_keys``
    (openpi keys read), ``required_keys`` (those a request must have), ``key_map``, ``policy`` (class name),
    ``cameras``, ``max_batch``, the :data:`DESCRIPTION_KEYS` the policy declares, and ``weights_sha256`` when the
    weights can be hashed (:func:`~upright.vla.checksums.policy_weights_sha256`: a torch module's parameters, an
    ONNX policy's file), so a client can tell whether the served weights changed."""
    from upright.vla.checksums import policy_weights_sha256

    reverse = {v: k for k, v in key_map.items()}
    cameras = tuple(_declared(policy, "cameras") or ())
    required = [reverse.get(STATE_KEY, STATE_KEY)] + [reverse.get(IMAGE_PREFIX + c, IMAGE_PREFIX + c) for c in cameras]
    meta = {
        "server": "upright-policy-server",
        "policy": type(policy).__name__,
        "chunk_size": int(policy.chunk_size),
        "action_dim": int(policy.action_dim),
        "action_convention": policy.action_convention,
        "observation_keys": list(key_map),
        "required_keys": required,
        "key_map": dict(key_map),
        "cameras": list(cameras),
        "max_batch": int(max_batch),
    }
    for key in DESCRIPTION_KEYS:
        value = _declared(policy, key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            meta[key] = value
    weights = policy_weights_sha256(policy)
    if weights is not None:
        meta["weights_sha256"] = weights
    return meta


def _signature(batch: dict) -> tuple:
    """What must agree for requests to share a policy call: keys, per-row shapes and dtypes."""
    return tuple((k, "task") if k == TASK_KEY else (k, tuple(v.shape[1:]), str(v.dtype))
                 for k, v in sorted(batch.items()))  # fmt: skip


def _stack(batches: list[dict]) -> dict:
    """Batches of 1 with one :func:`_signature` as one batch (rows in order)."""
    return {k: [t for b in batches for t in b[k]] if k == TASK_KEY else torch.cat([b[k] for b in batches])
            for k in batches[0]}


def _health_check(connection: ServerConnection, request):
    """``GET /healthz`` answers 200 OK (as openpi's server); other paths go on to the websocket handshake."""
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None


class PolicyServer:
    """The openpi websocket server of one policy (module docstring).

    Args:
        policy: the policy served (``chunk_size``, ``action_dim`` and ``action_convention`` go in the metadata).
        host: bind address; 127.0.0.1 by default (``"0.0.0.0"``: every interface, no authentication).
        port: TCP port; 0 picks a free one (:attr:`port` tells which once bound).
        key_map: openpi key -> LeRobot key (:data:`~upright.vla.keymap.DEFAULT_KEY_MAP`).
        max_batch: most pipelined requests of a connection answered by one policy call (1: each alone).

    Raises:
        ValueError: a bad key map, or ``max_batch`` < 1.
    """

    def __init__(self, policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 key_map: Mapping[str, str] = DEFAULT_KEY_MAP, max_batch: int = DEFAULT_MAX_BATCH):
        if int(max_batch) < 1:
            raise ValueError(f"max_batch must be >= 1 (1: every request alone), got {max_batch}")
        self.policy, self.host, self.port = policy, host, port
        self.key_map = check_key_map(key_map)
        self.max_batch = int(max_batch)
        self.cameras = tuple(_declared(policy, "cameras") or ())
        self.metadata = policy_metadata(policy, self.key_map, self.max_batch)
        self._meta_bytes = wire.packb(self.metadata)

    def answer(self, message: bytes | str, prev_total_ms: float | None = None) -> dict:
        """The reply to one request: ``{"actions": (H, A) float32, "server_timing": {...}}``.

        Raises:
            ValueError: a bad request (a text frame, undecodable bytes, a missing or malformed key).
            RuntimeError: the policy returned a chunk of another shape than (1, chunk_size, action_dim).
        """
        reply = self.answer_many([message], prev_total_ms)[0]
        if isinstance(reply, ValueError):
            raise reply
        return reply

    def answer_many(self, messages: list[bytes | str], prev_total_ms: float | None = None) -> list[dict | ValueError]:
        """The replies to several requests, in order: each a reply dict (as :meth:`answer`) or the ``ValueError`` of a
        bad request. Requests with the same keys and shapes share policy calls of at most ``max_batch`` rows; a call
        the policy refuses (``ValueError``) is retried row by row, so that each bad request gets its own error.
        ``prev_total_ms`` (the previous turn's total) goes to the first reply; the others get this call's total (the
        request before theirs was answered with them), as openpi's "previous request" timing.

        Raises:
            RuntimeError: the policy returned a chunk of another shape than (rows, chunk_size, action_dim).
            Exception: whatever else the policy raises (the handler answers it as openpi does).
        """
        t0 = time.monotonic()
        replies: list[dict | ValueError | None] = [None] * len(messages)
        groups: dict[tuple, list[tuple[int, dict]]] = {}
        for i, message in enumerate(messages):
            try:
                if isinstance(message, str):
                    raise ValueError("requests must be binary msgpack-numpy frames (openpi's packb), got a text frame")
                batch = observation_to_batch(wire.unpackb(message), self.key_map, self.cameras)
            except ValueError as e:
                replies[i] = e
                continue
            groups.setdefault(_signature(batch), []).append((i, batch))
        for rows in groups.values():
            for start in range(0, len(rows), self.max_batch):
                part = rows[start : start + self.max_batch]
                try:
                    chunk, infer_ms = self._infer(_stack([b for _, b in part]))
                except ValueError as e:
                    if len(part) == 1:
                        replies[part[0][0]] = e
                        continue
                    for i, b in part:  # which rows did the policy refuse?
                        try:
                            one, ms = self._infer(b)
                            replies[i] = {"actions": one[0], "server_timing": {"infer_ms": ms}}
                        except ValueError as e1:
                            replies[i] = e1
                    continue
                for j, (i, _) in enumerate(part):
                    replies[i] = {"actions": chunk[j], "server_timing": {"infer_ms": infer_ms}}
        total_ms = (time.monotonic() - t0) * 1000.0
        for i, reply in enumerate(replies):
            previous = prev_total_ms if i == 0 else total_ms
            if isinstance(reply, dict) and previous is not None:
                reply["server_timing"]["prev_total_ms"] = previous
        return replies

    def _infer(self, batch: dict) -> tuple[np.ndarray, float]:
        """((B, H, A) float32 chunk, ms) of one policy call on a batch of B rows.

        Raises:
            RuntimeError: a chunk of another shape than (B, chunk_size, action_dim).
        """
        b = len(batch[STATE_KEY])
        t0 = time.monotonic()
        with torch.no_grad():
            chunk = self.policy.predict_action_chunk(batch)
        infer_ms = (time.monotonic() - t0) * 1000.0
        want = (b, self.policy.chunk_size, self.policy.action_dim)
        if tuple(chunk.shape) != want:
            raise RuntimeError(f"{type(self.policy).__name__}.predict_action_chunk returned {tuple(chunk.shape)}, "
                               f"expected {want}")
        return chunk.detach().cpu().to(torch.float32).numpy(), infer_ms

    async def handler(self, ws: ServerConnection) -> None:
        """One client: metadata, then request/reply until it disconnects (or a policy error closes it). A reader task
        queues the requests as they arrive; each turn answers those queued (up to ``max_batch``) together."""
        peer = ws.remote_address
        log.info("connection from %s opened", peer)
        self.policy.reset()
        inbox: asyncio.Queue = asyncio.Queue()

        async def read() -> None:
            try:
                async for message in ws:
                    inbox.put_nowait(message)
            except ConnectionClosed:
                pass
            finally:
                inbox.put_nowait(None)  # the client is gone

        reader = asyncio.create_task(read())
        prev_total_ms = None
        try:
            await ws.send(self._meta_bytes)
            while True:
                message = await inbox.get()
                if message is None:
                    break
                messages, closing = [message], False
                while len(messages) < self.max_batch:
                    if inbox.empty():
                        await asyncio.sleep(0)  # let the reader queue requests that have already arrived
                        if inbox.empty():
                            break
                    message = inbox.get_nowait()
                    if message is None:
                        closing = True
                        break
                    messages.append(message)
                t0 = time.monotonic()
                try:
                    replies = self.answer_many(messages, prev_total_ms)
                except Exception:
                    log.exception("policy error on a request from %s; closing that connection", peer)
                    await ws.send(traceback.format_exc())
                    await ws.close(CloseCode.INTERNAL_ERROR,
                                   "Internal server error. Traceback included in previous frame.")
                    return
                for reply in replies:
                    if isinstance(reply, ValueError):
                        log.warning("bad request from %s: %s", peer, reply)
                        await ws.send(f"bad request: {reply}")
                    else:
                        await ws.send(wire.packb(reply))
                prev_total_ms = (time.monotonic() - t0) * 1000.0
                if closing:
                    break
        except ConnectionClosed:
            pass
        finally:
            reader.cancel()
            log.info("connection from %s closed", peer)

    async def run(self, stop: asyncio.Event | None = None, on_bound: Callable[[int], None] | None = None) -> None:
        """Serve until ``stop`` is set (forever when None); ``on_bound(port)`` is called once listening.

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        async with ws_serve(self.handler, self.host, self.port, compression=None, max_size=None,
                            process_request=_health_check) as server:
            self.port = server.sockets[0].getsockname()[1]
            log.info("serving %s on ws://%s:%d (chunk %d x %d, %s, max batch %d)", type(self.policy).__name__,
                     self.host, self.port, self.policy.chunk_size, self.policy.action_dim,
                     self.policy.action_convention, self.max_batch)
            if on_bound is not None:
                on_bound(self.port)
            if stop is None:
                await server.serve_forever()
            else:
                await stop.wait()


def serve(policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          key_map: Mapping[str, str] = DEFAULT_KEY_MAP, max_batch: int = DEFAULT_MAX_BATCH) -> None:
    """Serve ``policy`` until interrupted (blocking; :class:`PolicyServer` for the arguments and errors)."""
    asyncio.run(PolicyServer(policy, host, port, key_map, max_batch).run())


class BackgroundServer:
    """A :class:`PolicyServer` on a thread of its own (tests, benchmarks, notebooks); a context manager.

    ``port=0`` (the default) picks a free port: read :attr:`port`. :meth:`stop` closes it.

    Raises:
        OSError: the address cannot be bound (raised by the constructor).
    """

    def __init__(self, policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = 0,
                 key_map: Mapping[str, str] = DEFAULT_KEY_MAP, max_batch: int = DEFAULT_MAX_BATCH):
        self.server = PolicyServer(policy, host, port, key_map, max_batch)
        self.host = host
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="upright-policy-server", daemon=True)
        self._thread.start()
        self._bound.wait(timeout=30.0)
        if self._error is not None:
            raise self._error
        if self.port is None:
            raise RuntimeError("the policy server thread did not start within 30 s")

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def run():
            self._stop = asyncio.Event()
            await self.server.run(self._stop, on_bound=self._on_bound)

        try:
            self._loop.run_until_complete(run())
        except BaseException as e:  # reported to the constructor
            self._error = e
            self._bound.set()
        finally:
            self._loop.close()

    def _on_bound(self, port: int) -> None:
        self.port = port
        self._bound.set()

    @property
    def url(self) -> str:
        """``ws://host:port``."""
        return f"ws://{self.host}:{self.port}"

    def stop(self) -> None:
        """Close the listening socket and every connection; returns once the thread has ended (5 s at most)."""
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5.0)

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """``upright-policy-server``: serve a ChunkPolicy over openpi's websocket protocol."""
    from upright.vla.loaders import load_policy

    p = argparse.ArgumentParser(
        prog="upright-policy-server",
        description="Serve a ChunkPolicy over openpi's websocket protocol (any openpi client, or "
                    "upright.vla.remote.RemotePolicy, can use it). Requests: one openpi observation; replies: "
                    "{'actions': (H, A) float32, 'server_timing': {...}}.")
    p.add_argument("--policy", required=True,
                   help="MODULE:FACTORY (e.g. upright.vla.linear:make_linear_policy) or a file a registered loader "
                        "reads (upright.vla.loaders)")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument of the factory or loader (a string; repeatable)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="bind address (default 127.0.0.1: this machine only; --host 0.0.0.0 serves every interface, "
                        "with no authentication: trusted networks only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port (default 8000, as openpi's)")
    p.add_argument("--key-map", action="append", default=[], metavar="OPENPI_KEY=LEROBOT_KEY",
                   help="map an openpi observation key to a LeRobot batch key, replacing the default for that "
                        "LeRobot key (repeatable); defaults: "
                        + ", ".join(f"{k}={v}" for k, v in DEFAULT_KEY_MAP.items()))
    p.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH,
                   help=f"most pipelined requests of one connection answered by one policy call (default "
                        f"{DEFAULT_MAX_BATCH}; 1: every request alone, as openpi's server)")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    kwargs = {}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            p.error(f"--arg {item!r}: write KEY=VALUE")
        kwargs[key] = value
    if args.max_batch < 1:
        p.error(f"--max-batch must be >= 1, got {args.max_batch}")
    try:
        key_map = parse_key_map(args.key_map)
        policy = load_policy(args.policy, kwargs)
    except ValueError as e:
        p.error(str(e))
    try:
        serve(policy, args.host, args.port, key_map, args.max_batch)
    except OSError as e:
        raise SystemExit(f"upright-policy-server: cannot listen on {args.host}:{args.port}: {e}; "
                         "choose another --port") from None
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
