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

Errors (openpi's convention: an error is a *text* frame, on which openpi's client raises ``RuntimeError`` with the
text): a bad request (not msgpack, a bad ``__ndarray__`` dtype or shape, not a dict, a missing or malformed key, NaN
or inf in any float, a shape the policy refuses: any ``ValueError``) is answered with one line ``"bad request: ..."``
and logged in one line; the connection stays open for the next request. Any other exception of the policy is
answered with one line ``"policy error: <type>: <message> (...)"``, the traceback goes to the server's log only, and
the connection closes with code 1011 as in openpi's ``WebsocketPolicyServer`` (which sends the traceback); the
server keeps accepting connections. No client ever gets a traceback. ``GET /healthz`` answers 200.

Bounds (:mod:`upright.vla.server_guard`): requests over ``max_message_bytes`` (``--max-message-bytes``) are refused
(close 1009); a connection's unanswered requests are bounded (backpressure: the server stops reading a connection
whose inbox is full); a client that does not read its replies for ``send_timeout_s`` (``--send-timeout``) is
dropped. Memory per connection is thus bounded whatever the client does.

The server binds 127.0.0.1 by default (this machine only); a non-loopback bind (``host="0.0.0.0"``) logs a warning
naming ``--api-key``. With an API key (``--api-key`` or ``$UPRIGHT_POLICY_SERVER_API_KEY``) the websocket handshake
must carry ``Authorization: Api-Key <key>`` (what ``WebsocketClientPolicy(..., api_key=KEY)`` of openpi-client and
:class:`~upright.vla.remote.RemotePolicy` send): 401 without it, 403 with another key. The key travels in clear text
(``ws://``, no TLS). Policy calls run one at a time on the event loop (as in openpi): several connections are served
in turn, each batch of one connection's requests in one call.
"""

from __future__ import annotations

import asyncio
import http
import logging
import time
from collections.abc import Callable, Mapping

import numpy as np
import torch
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from upright.vla import wire
from upright.vla.keymap import DEFAULT_KEY_MAP, check_key_map, observation_to_batch, parse_key_map
from upright.vla.policy import STATE_KEY, TASK_KEY, ChunkPolicy
from upright.vla.server_guard import (
    API_KEY_ENV,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_SEND_TIMEOUT_S,
    MAX_QUEUE_FRAMES,
    WRITE_LIMIT_BYTES,
    RequestInbox,
    check_api_key,
    check_finite,
    exposed_addresses,
    one_line,
)
from upright.vla.server_metadata import DEFAULT_HOST, DEFAULT_MAX_BATCH, DEFAULT_PORT, _declared, policy_metadata

log = logging.getLogger(__name__)


def _signature(batch: dict) -> tuple:
    """What must agree for requests to share a policy call: keys, per-row shapes and dtypes."""
    return tuple(
        (k, "task") if k == TASK_KEY else (k, tuple(v.shape[1:]), str(v.dtype)) for k, v in sorted(batch.items())
    )


def _stack(batches: list[dict]) -> dict:
    """Batches of 1 with one :func:`_signature` as one batch (rows in order)."""
    return {
        k: [t for b in batches for t in b[k]] if k == TASK_KEY else torch.cat([b[k] for b in batches])
        for k in batches[0]
    }


class PolicyServer:
    """The openpi websocket server of one policy (module docstring).

    Args:
        policy: the policy served (``chunk_size``, ``action_dim`` and ``action_convention`` go in the metadata).
        host: bind address; 127.0.0.1 by default (``"0.0.0.0"``: every interface; a warning is logged).
        port: TCP port; 0 picks a free one (:attr:`port` tells which once bound).
        key_map: openpi key -> LeRobot key (:data:`~upright.vla.keymap.DEFAULT_KEY_MAP`).
        max_batch: most pipelined requests of a connection answered by one policy call (1: each alone).
        max_message_bytes: largest request accepted, bytes
            (:data:`~upright.vla.server_guard.DEFAULT_MAX_MESSAGE_BYTES`); a larger one closes its connection (1009).
        send_timeout_s: seconds a reply may wait for its client to read before the client is dropped.
        api_key: the key a client must send (``Authorization: Api-Key <key>``); None: no authentication.

    Raises:
        ValueError: a bad key map, ``max_batch`` < 1, ``max_message_bytes`` < 1, ``send_timeout_s`` <= 0 or an
            empty ``api_key``.
    """

    def __init__(
        self,
        policy: ChunkPolicy,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        key_map: Mapping[str, str] = DEFAULT_KEY_MAP,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
        api_key: str | None = None,
    ):
        if int(max_batch) < 1:
            raise ValueError(f"max_batch must be >= 1 (1: every request alone), got {max_batch}")
        if int(max_message_bytes) < 1 or not float(send_timeout_s) > 0:
            raise ValueError(
                f"max_message_bytes must be >= 1 and send_timeout_s > 0, got {max_message_bytes} and {send_timeout_s}"
            )
        if api_key is not None and not api_key.strip():
            raise ValueError("api_key is empty: give a key, or None for no authentication")
        self.policy, self.host, self.port = policy, host, port
        self.key_map = check_key_map(key_map)
        self.max_batch = int(max_batch)
        self.max_message_bytes, self.send_timeout_s = int(max_message_bytes), float(send_timeout_s)
        self.api_key = api_key
        self.cameras = tuple(_declared(policy, "cameras") or ())
        self.metadata = policy_metadata(policy, self.key_map, self.max_batch, self.max_message_bytes)
        self._meta_bytes = wire.packb(self.metadata)

    def answer(self, message: bytes | str, prev_total_ms: float | None = None) -> dict:
        """The reply to one request: ``{"actions": (H, A) float32, "server_timing": {...}}``.

        Raises:
            ValueError: a bad request (a text frame, undecodable bytes, a missing or malformed key, NaN or inf).
            RuntimeError: the policy returned a chunk of another shape than (1, chunk_size, action_dim).
        """
        reply = self.answer_many([message], prev_total_ms)[0]
        if isinstance(reply, ValueError):
            raise reply
        return reply

    def answer_many(self, messages: list[bytes | str], prev_total_ms: float | None = None) -> list[dict | ValueError]:
        """The replies to several requests, in order: each a reply dict (as :meth:`answer`) or the ``ValueError`` of a
        bad request (decoding never raises: whatever it raises is the request's ``ValueError``, one line). Requests
        with the same keys and shapes share policy calls of at most ``max_batch`` rows; a call
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
                obs = wire.unpackb(message)
                check_finite(obs)
                batch = observation_to_batch(obs, self.key_map, self.cameras)
            except ValueError as e:
                replies[i] = e
                continue
            except Exception as e:  # noqa: BLE001  (an untrusted request the checks above missed: still a bad one)
                replies[i] = ValueError(f"cannot read the request: {type(e).__name__}: {e}")
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
            raise RuntimeError(
                f"{type(self.policy).__name__}.predict_action_chunk returned {tuple(chunk.shape)}, expected {want}"
            )
        return chunk.detach().cpu().to(torch.float32).numpy(), infer_ms

    async def _send(self, ws: ServerConnection, data: bytes | str) -> None:
        """Send one message; a client that has not taken it within ``send_timeout_s`` (websockets' write buffer over
        :data:`~upright.vla.server_guard.WRITE_LIMIT_BYTES`: its socket buffers are full) is dropped.

        Raises:
            ConnectionClosed: the connection is closed, or was just aborted for that reason.
        """
        sending = asyncio.ensure_future(ws.send(data))
        sending.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even when abandoned
        try:
            await asyncio.wait_for(asyncio.shield(sending), self.send_timeout_s)
        except TimeoutError:
            log.warning(
                "client %s has not read its replies for %.1f s (--send-timeout); dropping it",
                ws.remote_address,
                self.send_timeout_s,
            )
            ws.transport.abort()
            await asyncio.wait({sending}, timeout=1.0)
            raise ConnectionClosed(None, None) from None

    async def handler(self, ws: ServerConnection) -> None:
        """One client: metadata, then request/reply until it disconnects (or a policy error closes it). A reader task
        moves the requests into a bounded :class:`~upright.vla.server_guard.RequestInbox` (waiting while it is full:
        backpressure); each turn answers those waiting there (up to ``max_batch``) together."""
        peer = ws.remote_address
        log.info("connection from %s opened", peer)
        self.policy.reset()
        inbox = RequestInbox(self.max_batch, self.max_message_bytes)

        async def read() -> None:
            try:
                async for message in ws:
                    await inbox.put(message)
            except ConnectionClosed as e:
                if e.sent is not None and e.sent.code == CloseCode.MESSAGE_TOO_BIG:
                    log.warning(
                        "refused a request from %s: %s (--max-message-bytes %d); connection closed",
                        peer,
                        one_line(e.sent.reason),
                        self.max_message_bytes,
                    )
            finally:
                await inbox.close()  # the client is gone

        reader = asyncio.create_task(read())
        prev_total_ms = None
        try:
            await self._send(ws, self._meta_bytes)
            while messages := await inbox.take(self.max_batch):
                t0 = time.monotonic()
                try:
                    replies = self.answer_many(messages, prev_total_ms)
                except Exception as e:
                    log.exception("policy error on a request from %s; closing that connection", peer)
                    await self._send(
                        ws, one_line(f"policy error: {type(e).__name__}: {e} (the traceback is in the server's log)")
                    )
                    await ws.close(CloseCode.INTERNAL_ERROR, "internal server error (see the server's log)")
                    return
                for reply in replies:
                    if isinstance(reply, ValueError):
                        text = one_line(f"bad request: {reply}")
                        log.warning("%s: %s", peer, text)
                        await self._send(ws, text)
                    else:
                        await self._send(ws, wire.packb(reply))
                prev_total_ms = (time.monotonic() - t0) * 1000.0
        except ConnectionClosed:
            pass
        finally:
            reader.cancel()
            log.info("connection from %s closed", peer)

    def _process_request(self, connection: ServerConnection, request):
        """Before the handshake: ``GET /healthz`` answers 200 OK (as openpi's server, no key needed); with an API key,
        a request without ``Authorization: Api-Key <key>`` gets 401 and one with another key 403."""
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.api_key is None:
            return None
        status = check_api_key(request.headers.get("Authorization"), self.api_key)
        if status is None:
            return None
        log.warning(
            "refused a connection from %s: %s",
            connection.remote_address,
            "no Authorization header" if status == http.HTTPStatus.UNAUTHORIZED else "wrong API key",
        )
        response = connection.respond(
            status,
            "send the header 'Authorization: Api-Key <key>' with the server's "
            "key (openpi-client: WebsocketClientPolicy(host, port, api_key=KEY))\n",
        )
        if status == http.HTTPStatus.UNAUTHORIZED:
            response.headers["WWW-Authenticate"] = "Api-Key"
        return response

    async def run(self, stop: asyncio.Event | None = None, on_bound: Callable[[int], None] | None = None) -> None:
        """Serve until ``stop`` is set (forever when None); ``on_bound(port)`` is called once listening. A bind to
        other than loopback addresses logs a warning naming ``--api-key``.

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        async with ws_serve(
            self.handler,
            self.host,
            self.port,
            compression=None,
            max_size=self.max_message_bytes,
            max_queue=MAX_QUEUE_FRAMES,
            write_limit=WRITE_LIMIT_BYTES,
            process_request=self._process_request,
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            log.info(
                "serving %s on ws://%s:%d (chunk %d x %d, %s, max batch %d, max message %d bytes, %s)",
                type(self.policy).__name__,
                self.host,
                self.port,
                self.policy.chunk_size,
                self.policy.action_dim,
                self.policy.action_convention,
                self.max_batch,
                self.max_message_bytes,
                "API key required" if self.api_key else "no API key",
            )
            exposed = exposed_addresses(str(sock.getsockname()[0]) for sock in server.sockets)
            if exposed and self.api_key is None:
                log.warning(
                    "listening on %s:%d, reachable from other machines, with NO authentication: anyone who "
                    "can reach this port can query the policy; set --api-key (or $%s), or bind 127.0.0.1",
                    ", ".join(exposed),
                    self.port,
                    API_KEY_ENV,
                )
            elif exposed:
                log.warning(
                    "listening on %s:%d, reachable from other machines; clients need the API key "
                    "(--api-key), which travels in clear text (ws://, no TLS): trusted networks only",
                    ", ".join(exposed),
                    self.port,
                )
            if on_bound is not None:
                on_bound(self.port)
            if stop is None:
                await server.serve_forever()
            else:
                await stop.wait()


def serve(policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, **kwargs) -> None:
    """Serve ``policy`` until interrupted (blocking; :class:`PolicyServer` for the arguments and errors)."""
    asyncio.run(PolicyServer(policy, host, port, **kwargs).run())


def main(argv: list[str] | None = None) -> None:
    """``upright-policy-server``: serve a ChunkPolicy over openpi's websocket protocol.

    Every mistake (a bad option or value, a --policy that cannot be loaded, a port in use or out of range, a host
    that cannot be bound) exits with code 2 and one line on stderr, no traceback
    (:func:`~upright.vla.server_cli.fail`).
    """
    from upright.vla.loaders import load_policy
    from upright.vla.server_cli import fail, parse_args

    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        key_map = parse_key_map(args.key_map)
    except ValueError as e:
        fail(str(e))
    try:
        policy = load_policy(args.policy, args.kwargs)
    except ValueError as e:  # the loaders' own messages name --policy; a factory's (a bad --arg) do not
        fail(str(e) if "--policy" in str(e) else f"cannot load --policy {args.policy!r}: {e}")
    except Exception as e:  # noqa: BLE001  (a loader's failure on a bad file: one line, not its traceback)
        fail(f"cannot load --policy {args.policy!r}: {type(e).__name__}: {e}")
    try:
        serve(
            policy,
            args.host,
            args.port,
            key_map=key_map,
            max_batch=args.max_batch,
            max_message_bytes=args.max_message_bytes,
            send_timeout_s=args.send_timeout,
            api_key=args.api_key,
        )
    except (OSError, OverflowError) as e:
        fail(f"cannot listen on {args.host}:{args.port}: {e}; choose another --port (or --host)")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
