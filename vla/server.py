"""Serving a :class:`~upright.vla.policy.ChunkPolicy` over openpi's websocket protocol (``upright-policy-server``).

Any openpi client (``openpi_client.websocket_client_policy.WebsocketClientPolicy``, or our
:class:`~upright.vla.remote.RemotePolicy`) can use the policy: on connect the server sends its metadata (chunk size,
action dim, action convention, the observation keys it reads; :func:`policy_metadata`); each request is one openpi
observation, mapped to a LeRobot batch of size 1 (:mod:`upright.vla.keymap`), and each reply is
``{"actions": (H, A) float32, "server_timing": {"infer_ms": ..., "prev_total_ms": ...}}`` (openpi's timing keys; ms).

Errors: a bad request (undecodable, a missing or malformed key, a shape the policy refuses: any ``ValueError``) is
answered with a one-line text frame ``"bad request: ..."`` and logged; the connection stays open for the next request
(openpi's client raises ``RuntimeError`` on a text frame and can go on). Any other exception of the policy is
handled as openpi's ``WebsocketPolicyServer`` does: the traceback goes to the client as a text frame, the connection
closes with code 1011, and it is logged; the server keeps accepting connections. ``GET /healthz`` answers 200.

The server binds 127.0.0.1 by default (this machine only); ``host="0.0.0.0"`` serves every interface, with no
authentication: use it on a trusted network only. Policy calls run one at a time on the event loop (as in openpi).
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

import torch
from websockets.asyncio.server import ServerConnection, serve as ws_serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from upright.vla import wire
from upright.vla.keymap import DEFAULT_KEY_MAP, check_key_map, observation_to_batch, parse_key_map
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY, ChunkPolicy

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def policy_metadata(policy: ChunkPolicy, key_map: Mapping[str, str] = DEFAULT_KEY_MAP) -> dict:
    """The metadata sent on connect: ``chunk_size``, ``action_dim``, ``action_convention``, ``observation_keys``
    (openpi keys read), ``required_keys`` (those a request must have), ``key_map``, ``policy`` (class name), and
    ``state_dim`` / ``cameras`` when the policy declares them."""
    reverse = {v: k for k, v in key_map.items()}
    cameras = tuple(getattr(policy, "cameras", ()) or ())
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
    }
    if isinstance(getattr(policy, "state_dim", None), int):
        meta["state_dim"] = policy.state_dim
    return meta


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

    Raises:
        ValueError: a bad key map.
    """

    def __init__(self, policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 key_map: Mapping[str, str] = DEFAULT_KEY_MAP):
        self.policy, self.host, self.port = policy, host, port
        self.key_map = check_key_map(key_map)
        self.cameras = tuple(getattr(policy, "cameras", ()) or ())
        self.metadata = policy_metadata(policy, self.key_map)
        self._meta_bytes = wire.packb(self.metadata)

    def answer(self, message: bytes | str, prev_total_ms: float | None = None) -> dict:
        """The reply to one request: ``{"actions": (H, A) float32, "server_timing": {...}}``.

        Raises:
            ValueError: a bad request (a text frame, undecodable bytes, a missing or malformed key).
            RuntimeError: the policy returned a chunk of another shape than (1, chunk_size, action_dim).
        """
        if isinstance(message, str):
            raise ValueError("requests must be binary msgpack-numpy frames (openpi's packb), got a text frame")
        batch = observation_to_batch(wire.unpackb(message), self.key_map, self.cameras)
        t0 = time.monotonic()
        with torch.no_grad():
            chunk = self.policy.predict_action_chunk(batch)
        infer_ms = (time.monotonic() - t0) * 1000.0
        want = (1, self.policy.chunk_size, self.policy.action_dim)
        if tuple(chunk.shape) != want:
            raise RuntimeError(f"{type(self.policy).__name__}.predict_action_chunk returned {tuple(chunk.shape)}, "
                               f"expected {want}")
        timing = {"infer_ms": infer_ms}
        if prev_total_ms is not None:
            timing["prev_total_ms"] = prev_total_ms
        return {"actions": chunk[0].detach().cpu().to(torch.float32).numpy(), "server_timing": timing}

    async def handler(self, ws: ServerConnection) -> None:
        """One client: metadata, then request/reply until it disconnects (or a policy error closes it)."""
        peer = ws.remote_address
        log.info("connection from %s opened", peer)
        self.policy.reset()
        prev_total_ms = None
        try:
            await ws.send(self._meta_bytes)
            while True:
                message = await ws.recv()
                t0 = time.monotonic()
                try:
                    reply = self.answer(message, prev_total_ms)
                except ValueError as e:
                    log.warning("bad request from %s: %s", peer, e)
                    await ws.send(f"bad request: {e}")
                    prev_total_ms = None
                    continue
                except Exception:
                    log.exception("policy error on a request from %s; closing that connection", peer)
                    await ws.send(traceback.format_exc())
                    await ws.close(CloseCode.INTERNAL_ERROR,
                                   "Internal server error. Traceback included in previous frame.")
                    return
                await ws.send(wire.packb(reply))
                prev_total_ms = (time.monotonic() - t0) * 1000.0
        except ConnectionClosed:
            log.info("connection from %s closed", peer)

    async def run(self, stop: asyncio.Event | None = None, on_bound: Callable[[int], None] | None = None) -> None:
        """Serve until ``stop`` is set (forever when None); ``on_bound(port)`` is called once listening.

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        async with ws_serve(self.handler, self.host, self.port, compression=None, max_size=None,
                            process_request=_health_check) as server:
            self.port = server.sockets[0].getsockname()[1]
            log.info("serving %s on ws://%s:%d (chunk %d x %d, %s)", type(self.policy).__name__, self.host,
                     self.port, self.policy.chunk_size, self.policy.action_dim, self.policy.action_convention)
            if on_bound is not None:
                on_bound(self.port)
            if stop is None:
                await server.serve_forever()
            else:
                await stop.wait()


def serve(policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          key_map: Mapping[str, str] = DEFAULT_KEY_MAP) -> None:
    """Serve ``policy`` until interrupted (blocking; :class:`PolicyServer` for the arguments and errors)."""
    asyncio.run(PolicyServer(policy, host, port, key_map).run())


class BackgroundServer:
    """A :class:`PolicyServer` on a thread of its own (tests, benchmarks, notebooks); a context manager.

    ``port=0`` (the default) picks a free port: read :attr:`port`. :meth:`stop` closes it.

    Raises:
        OSError: the address cannot be bound (raised by the constructor).
    """

    def __init__(self, policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = 0,
                 key_map: Mapping[str, str] = DEFAULT_KEY_MAP):
        self.server = PolicyServer(policy, host, port, key_map)
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
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    kwargs = {}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            p.error(f"--arg {item!r}: write KEY=VALUE")
        kwargs[key] = value
    try:
        key_map = parse_key_map(args.key_map)
        policy = load_policy(args.policy, kwargs)
    except ValueError as e:
        p.error(str(e))
    try:
        serve(policy, args.host, args.port, key_map)
    except OSError as e:
        raise SystemExit(f"upright-policy-server: cannot listen on {args.host}:{args.port}: {e}; "
                         "choose another --port") from None
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
