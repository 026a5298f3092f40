"""What keeps ``upright-policy-server`` (:mod:`upright.vla.server`) bounded and closed under any client (issue 33 §5).

- Size: a websocket message over :data:`DEFAULT_MAX_MESSAGE_BYTES` (``--max-message-bytes``) is refused by websockets
  as soon as its frame header announces the length (close code 1009, "message too big"; nothing of it is buffered).
- Inbox: a connection's received requests wait in a :class:`RequestInbox` of at most ``max_batch`` requests and
  ``max_message_bytes`` bytes (one request always fits). When it is full the server stops reading that connection,
  websockets' own buffer fills (:data:`MAX_QUEUE_FRAMES`), websockets stops reading the socket, and the client's
  sends block in its kernel (TCP backpressure). Memory per connection is therefore bounded by a small multiple of
  ``max_message_bytes``, about 12 x (websockets' buffer of ``MAX_QUEUE_FRAMES`` + 2 frames, the inbox, the request in
  the reader's hand, the batch being answered and its decoded copies), plus :data:`WRITE_LIMIT_BYTES` and one reply,
  whatever the client does: 48 MiB at the default 4 MiB (the kernel's socket buffers are not the process's).
- Write side: a reply waits in websockets' write buffer until it falls under :data:`WRITE_LIMIT_BYTES`; a client that
  does not read its replies for ``send_timeout_s`` (:data:`DEFAULT_SEND_TIMEOUT_S`, ``--send-timeout``) is dropped
  (its TCP connection aborted) instead of being buffered for.
- Values: NaN or inf anywhere in a request's floats is a bad request (:func:`check_finite`).
- Errors: every error a client gets is one line (:func:`one_line`); tracebacks go to the server's log only.
- Authentication: with an API key (``--api-key`` or :data:`API_KEY_ENV`) the handshake must carry the header
  ``Authorization: Api-Key <key>``, which openpi-client 0.1.2 sends for ``WebsocketClientPolicy(host, port,
  api_key=...)`` (``openpi_client/websocket_client_policy.py``, ``_wait_for_server``): missing is HTTP 401, wrong
  HTTP 403, both before any websocket frame. ``GET /healthz`` needs no key (it says only "OK").
- Binding: :func:`exposed_addresses` names the non-loopback addresses a server listens on, for a run-time warning.

Not bounded here: the number of connections (each one bounded as above); a server reachable by untrusted machines
wants a key, and a proxy or firewall that limits connections.
"""

from __future__ import annotations

import asyncio
import hmac
import http
import ipaddress
import math
from collections import deque
from collections.abc import Iterable

import numpy as np

DEFAULT_MAX_MESSAGE_BYTES = 4 * 2**20
"""Largest request a server accepts by default, bytes (4 MiB = 4,194,304).

Sized for camera batches, with room: one (H, W, 3) uint8 image is H·W·3 bytes on the wire (openpi's ``__ndarray__``
map adds ~60 bytes), so 224 x 224 x 3 is 150,528 B and openpi's LIBERO request (2 such images + an 8-value float64
state + a prompt) is ~301 kB; four 480 x 640 x 3 frames (a 4-camera robot at VGA) are 3,686,400 B, still under 4 MiB
with their state and prompt. Larger requests (more or bigger cameras, float images: 4 bytes per value) need
``--max-message-bytes``."""

MAX_QUEUE_FRAMES = 4
"""websockets' ``max_queue`` (frames received but not yet read by the server; reading the socket pauses above it and
resumes at 1). openpi's clients send a message as one frame."""

WRITE_LIMIT_BYTES = 2**15
"""websockets' ``write_limit`` (32 KiB, its default, set explicitly): a send waits until the connection's write
buffer is under it, so a client that does not read holds at most this plus one reply in the server."""

DEFAULT_SEND_TIMEOUT_S = 10.0
"""Seconds a reply may wait for a client to read (its socket buffers full) before the client is dropped."""

API_KEY_ENV = "UPRIGHT_POLICY_SERVER_API_KEY"
"""Environment variable with the API key (so that the key is not on the command line, visible in ``ps``)."""

ERROR_MAX_CHARS = 300
"""Longest error line sent to a client, characters (longer ones are cut, ending in "...")."""


def one_line(text: str, limit: int = ERROR_MAX_CHARS) -> str:
    """``text`` with its whitespace runs (newlines included) as single spaces, cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def check_finite(obs: object, max_depth: int = 32) -> None:
    """Refuse NaN or inf anywhere in an unpacked request: float arrays, numpy float scalars and msgpack floats, in
    dicts and lists nested up to ``max_depth`` (values under keys the policy ignores included).

    Raises:
        ValueError: one line naming the first key holding a non-finite value, and how many of its values are.
    """
    stack: list[tuple[str, object, int]] = [("", obs, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, dict):
            if depth >= max_depth:
                raise ValueError(f"request nested deeper than {max_depth} levels")
            stack.extend((f"{path}/{k}" if path else str(k), v, depth + 1) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            if depth >= max_depth:
                raise ValueError(f"request nested deeper than {max_depth} levels")
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
            if not np.isfinite(value).all():
                bad = int(value.size - np.count_nonzero(np.isfinite(value)))
                raise ValueError(
                    f"'{path}' has {bad} non-finite value(s) (NaN or inf) of {value.size}: send finite numbers"
                )
        elif isinstance(value, (float, np.floating)) and not math.isfinite(float(value)):
            raise ValueError(f"'{path or 'request'}' is {float(value)} (NaN or inf): send finite numbers")


class RequestInbox:
    """A connection's received, not yet answered requests: FIFO, at most ``max_items`` and ``max_bytes`` (a single
    request always fits); :meth:`put` waits while full, which is the backpressure (module docstring).

    Args:
        max_items: most requests held (the server's ``max_batch``).
        max_bytes: most bytes held, summed over the requests (the server's ``max_message_bytes``).
    """

    def __init__(self, max_items: int, max_bytes: int):
        self.max_items, self.max_bytes = int(max_items), int(max_bytes)
        self._items: deque[bytes | str] = deque()
        self.nbytes = 0
        self.closed = False
        self._changed = asyncio.Condition()

    def __len__(self) -> int:
        return len(self._items)

    def _fits(self, size: int) -> bool:
        return not self._items or (len(self._items) < self.max_items and self.nbytes + size <= self.max_bytes)

    async def put(self, message: bytes | str) -> None:
        """Add a request, waiting until it fits."""
        size = len(message)
        async with self._changed:
            await self._changed.wait_for(lambda: self._fits(size))
            self._items.append(message)
            self.nbytes += size
            self._changed.notify_all()

    async def close(self) -> None:
        """No more requests will come (the client left); :meth:`take` returns what is left, then ``[]``."""
        async with self._changed:
            self.closed = True
            self._changed.notify_all()

    async def take(self, n: int) -> list[bytes | str]:
        """Up to ``n`` requests, oldest first: waits for one, lets the reader add those already received, takes them.
        ``[]`` once closed and empty."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._items or self.closed)
        await asyncio.sleep(0)  # the reader may hold requests that have already arrived
        async with self._changed:
            out = []
            while self._items and len(out) < n:
                message = self._items.popleft()
                self.nbytes -= len(message)
                out.append(message)
            self._changed.notify_all()
        return out


def check_api_key(header: str | None, api_key: str) -> http.HTTPStatus | None:
    """None when ``header`` (the request's ``Authorization`` value) is ``Api-Key <api_key>`` (openpi-client's
    format; compared in constant time), else 401 (no header) or 403 (another key or scheme)."""
    if header is None:
        return http.HTTPStatus.UNAUTHORIZED
    if not hmac.compare_digest(header.encode("utf-8", "replace"), f"Api-Key {api_key}".encode()):
        return http.HTTPStatus.FORBIDDEN
    return None


def exposed_addresses(addresses: Iterable[str]) -> list[str]:
    """The addresses that are not loopback (``127.0.0.0/8``, ``::1``) among the bound ``addresses``."""
    out = []
    for address in addresses:
        try:
            loopback = ipaddress.ip_address(address.split("%")[0]).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            out.append(address)
    return out
