"""The operator channel: a local Unix-socket API (``upright-deploy ctl ...``) and keyboard keys.

Requests are one JSON object per line, ``{"cmd": "pause"}``; each gets one JSON line back,
``{"ok": true, "mode": "PAUSED", "episode_index": 3, "frame_index": 120, ...}``, sent from the
policy tick that applied it (``frame_index`` is the logged frame that tick wrote, so a client knows
exactly which frames its command affected). The control loop polls the socket without blocking,
once per policy tick; no thread runs in the control process.

Commands: ``start`` (ZERO_TORQUE -> RAMP_TO_DEFAULT), ``resume`` (HOLD or PAUSED -> POLICY),
``pause``, ``takeover``, ``release``, ``estop``, ``mark-success``, ``mark-failure``, ``status``,
``target`` (HUMAN mode: ``{"cmd": "target", "targets": {"left_knee_joint": 0.5}}``, absolute joint
targets, rate-limited), ``quit`` (damping, then exit).

Bad input. Whatever a permitted client sends ends in one JSON line back, never in an exception out of
:meth:`OperatorServer.poll` (which would damp the robot and stop the daemon): a line that is not UTF-8, not
JSON, nested deeper than :data:`MAX_JSON_DEPTH`, not a JSON object, with a field other than ``cmd`` and
``targets`` or a ``cmd`` that is not a string gets ``{"ok": false, "error": "bad request: ..."}`` and the
connection stays open; a line longer than :data:`MAX_LINE_BYTES`, or one left unfinished for
``line_timeout_s``, gets that reply and the connection is closed. The daemon's mode does not change.

Security. The socket lives in a folder only its user (or root, or systemd) can write:
``$UPRIGHT_DEPLOY_SOCKET``, else ``/run/upright-deploy/ctl.sock`` (the service's runtime folder), else
``$XDG_RUNTIME_DIR/upright-deploy.sock``, else ``<tmp>/upright-deploy-<uid>/ctl.sock`` in a 0700 folder
of the user. The daemon refuses, before any serial port opens, a socket path that exists and is not a
stale socket of its own, and a folder that others could write (without the sticky bit) or that
belongs to another user. Both ends check the other with SO_PEERCRED: the daemon answers only its own
user, root and the configured group (``--ctl-group``); ``ctl`` talks only to a daemon running as
itself, root, the owner of a root-created socket folder (``/run/upright-deploy``), or ``--daemon-user``. Those
checks, the socket's path and the client (:func:`~upright.deploy.operator_socket.send_command`) are in
:mod:`upright.deploy.operator_socket`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time

from upright.deploy.operator_socket import (
    SocketSecurityError,
    _process_groups,
    _user,
    peer_credentials,
    prepare_socket_path,
)

log = logging.getLogger("upright.deploy")

COMMANDS = (
    "start", "resume", "pause", "takeover", "release", "estop", "mark-success", "mark-failure", "status",
    "target", "quit",
)  # fmt: skip

KEYS = {
    "s": "start", "r": "resume", " ": "pause", "p": "pause", "t": "takeover", "l": "release", "e": "estop",
    "\x1b": "estop", "y": "mark-success", "n": "mark-failure", "q": "quit",
}  # fmt: skip
"""Keyboard bindings (single keys, no Enter needed)."""

REQUEST_FIELDS = ("cmd", "targets")
"""The fields a request may have: ``cmd`` (a string, one of :data:`COMMANDS`) and, with ``cmd`` ``target`` only,
``targets``. A request with any other field is refused as a whole."""

MAX_LINE_BYTES = 64 * 1024
"""Longest request line, bytes, without its newline (64 KiB; a ``target`` of all 29 joints is under 1 KiB). A client
whose line grows past it gets one error line and is disconnected, its buffered bytes dropped."""

MAX_JSON_DEPTH = 8
"""Deepest nesting of JSON arrays and objects in a request (a valid request nests 2 deep). Checked on the bytes before
parsing, so a deeply nested line costs one scan and never reaches the recursive parser."""

LINE_TIMEOUT_S = 10.0
"""Default time, seconds, a client may leave a started line unfinished before it gets one error line and is
disconnected (``ctl`` sends its whole line at once)."""


class _Client:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.partial_since: float | None = None
        """``time.monotonic()`` when the unfinished line in ``buf`` began (None: no unfinished line)."""
        self.warned = False
        """A bad request of this client was logged (one warning per connection, not one per line)."""


class BadRequest(ValueError):
    """A request line the daemon refuses; the message is the one-line reason sent back to the client."""


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _json_depth(line: bytes) -> int:
    """Deepest nesting of arrays and objects in the JSON text ``line``, or 0 when it has too few brackets to pass
    :data:`MAX_JSON_DEPTH`; exact for valid JSON (brackets inside strings do not count), and the scan stops once past
    the limit. The work is C-level except one step per bracket outside strings."""
    if line.count(b"[") + line.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # cannot be deeper than the limit: the common case, no scan
    # drop escaped backslashes, then escaped quotes: what is left of '"' are the strings' delimiters
    outside = b"".join(line.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    depth = deepest = 0
    for b in outside.translate(None, _NOT_BRACKETS):
        depth += 1 if b in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                break
    return deepest


def _short(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters (client-chosen names go into replies and the log)."""
    text = repr(value) if isinstance(value, str) else type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_request(line: bytes) -> dict:
    """One request line (without its newline) as a request dict.

    Raises:
        BadRequest: the line is not UTF-8, not JSON, nested deeper than :data:`MAX_JSON_DEPTH`, not a JSON object,
            has a field not in :data:`REQUEST_FIELDS` (or ``targets`` with a ``cmd`` other than ``target``), or its
            ``cmd`` is missing or not a string. The message is one line and starts with ``bad request:``.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadRequest(f"bad request: not UTF-8 ({err.reason} at byte {err.start})") from None
    if _json_depth(line) > MAX_JSON_DEPTH:
        raise BadRequest(f"bad request: JSON nested deeper than {MAX_JSON_DEPTH} levels (a request nests 2 at most)")
    try:
        req = json.loads(text)
    except RecursionError:  # not reached after the depth check; kept so that it can never escape
        raise BadRequest(f"bad request: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as err:  # JSONDecodeError, and an integer of more than 4300 digits
        raise BadRequest(f"bad request: not JSON ({str(err).splitlines()[0][:200]})") from None
    if not isinstance(req, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(req), "a number")
        raise BadRequest(f'bad request: a request is one JSON object, e.g. {{"cmd": "status"}}, not {kind}')
    unknown = [k for k in req if k not in REQUEST_FIELDS]
    if unknown:
        raise BadRequest(
            f"bad request: unknown field {', '.join(_short(k) for k in unknown[:4])}"
            f"{' ...' if len(unknown) > 4 else ''}; fields: {', '.join(REQUEST_FIELDS)}"
        )
    cmd = req.get("cmd")
    if not isinstance(cmd, str):
        raise BadRequest(
            f"bad request: 'cmd' must be a string, one of: {' '.join(COMMANDS)} "
            f"(got {'nothing' if cmd is None else _short(cmd)})"
        )
    if "targets" in req and cmd != "target":
        raise BadRequest(f"bad request: 'targets' goes with cmd 'target' only (cmd is {_short(cmd)})")
    return req


class OperatorServer:
    """Non-blocking Unix-socket server polled by the control loop.

    Args:
        path: socket path, checked by :func:`prepare_socket_path` (a stale socket of this user is replaced; the
            folder is created 0700).
        group: gid whose members may also send commands (None: only this user and root). The socket is made
            0660 and given this group when possible.
        line_timeout_s: seconds a client may leave a started line unfinished (default :data:`LINE_TIMEOUT_S`);
            then it gets one error line and is disconnected.

    Raises:
        SocketSecurityError: see :func:`prepare_socket_path`, or another process took the path meanwhile.
    """

    def __init__(self, path: str, group: int | None = None, line_timeout_s: float = LINE_TIMEOUT_S):
        self.path = path
        self.group = group
        self.line_timeout_s = line_timeout_s
        self.refused = 0
        """Connections refused because the peer was not allowed."""
        self.bad_requests = 0
        """Request lines refused by :func:`parse_request`, over-long or left unfinished (each got an error line)."""
        prepare_socket_path(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(path)
        except OSError as err:
            self.sock.close()
            raise SocketSecurityError(f"cannot create the socket {path}: {err}") from None
        os.chmod(path, 0o660 if group is not None else 0o600)
        if group is not None:
            try:
                os.chown(path, -1, group)
            except OSError as err:
                log.warning(
                    "socket %s: cannot give it group %d (%s); only its user and root can connect", path, group, err
                )
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.clients: list[_Client] = []

    def allowed(self, pid: int, uid: int, gid: int) -> bool:
        """This daemon's user, root, or (with ``group``) a process in that group."""
        if uid in (os.geteuid(), 0):
            return True
        return self.group is not None and (gid == self.group or self.group in _process_groups(pid))

    def poll(self, max_requests: int = 8) -> list[tuple[dict, _Client]]:
        """Accept connections and return complete, well-formed requests (at most ``max_requests``); never blocks.

        Never raises: a bad line is answered here with one ``{"ok": false, "error": "bad request: ..."}`` line (see
        :func:`parse_request`) and is not returned. A client whose unfinished line passes :data:`MAX_LINE_BYTES`
        bytes or stays unfinished for ``line_timeout_s`` seconds gets that line and is disconnected. A client is
        read only while it has no complete line waiting, so each buffer stays under :data:`MAX_LINE_BYTES` + 1 bytes
        and a fast sender waits in its own socket.
        """
        self._accept()
        out: list[tuple[dict, _Client]] = []
        for c in list(self.clients):
            try:
                self._serve(c, out, max_requests)
            except Exception:  # a bug here must not stop the daemon: drop this client, keep the mode
                log.exception("operator socket: dropped a client after an internal error")
                self.reply(c, {"ok": False, "error": "internal error of the daemon; connection closed"})
                self._drop(c)
        return out

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # BlockingIOError: nobody waiting; EMFILE and the like: try again next poll
                return
            try:
                pid, uid, gid = peer_credentials(conn)
                conn.setblocking(False)
            except OSError:
                conn.close()
                continue
            if not self.allowed(pid, uid, gid):
                self.refused += 1
                log.warning(
                    "operator socket: refused pid %d, %s (allowed: %s, root%s)",
                    pid,
                    _user(uid),
                    _user(os.geteuid()),
                    f", group {self.group}" if self.group is not None else "",
                )
                try:
                    conn.send(
                        (
                            json.dumps({"ok": False, "error": f"{_user(uid)} may not operate this daemon"}) + "\n"
                        ).encode()
                    )
                except OSError:
                    pass
                conn.close()
                continue
            self.clients.append(_Client(conn))

    def _serve(self, c: _Client, out: list[tuple[dict, _Client]], max_requests: int) -> None:
        """Read what ``c`` sent (if no complete line of it waits), parse its complete lines into ``out``, answer the
        bad ones, and enforce :data:`MAX_LINE_BYTES` and ``line_timeout_s`` on its unfinished line."""
        if b"\n" not in c.buf:
            try:
                data = c.sock.recv(MAX_LINE_BYTES + 1 - len(c.buf))
            except BlockingIOError:
                data = None
            except OSError:
                self._drop(c)
                return
            if data == b"":  # the client closed its end
                self._drop(c)
                return
            if data:
                c.buf += data
        while b"\n" in c.buf and len(out) < max_requests:
            end = c.buf.index(b"\n")
            line = bytes(c.buf[:end])
            del c.buf[: end + 1]
            c.partial_since = None
            try:
                out.append((parse_request(line), c))
            except BadRequest as err:
                self._refuse(c, str(err))
                if c not in self.clients:  # it does not read its replies: its socket is full
                    return
        if not c.buf or b"\n" in c.buf:
            return
        now = time.monotonic()
        if len(c.buf) > MAX_LINE_BYTES:
            self._refuse(
                c, f"bad request: line longer than {MAX_LINE_BYTES} bytes (no newline); connection closed", drop=True
            )
        elif c.partial_since is None:
            c.partial_since = now
        elif now - c.partial_since > self.line_timeout_s:
            self._refuse(c, f"bad request: line left unfinished for more than {self.line_timeout_s:g} s "
                            "(end each request with a newline); connection closed", drop=True)  # fmt: skip

    def _refuse(self, c: _Client, error: str, drop: bool = False) -> None:
        """Answer one bad line of ``c`` with ``error`` (one JSON line), log the first per connection, maybe drop."""
        self.bad_requests += 1
        if not c.warned:
            c.warned = True
            log.warning("operator socket: %s", error)
        self.reply(c, {"ok": False, "error": error})
        if drop:
            c.buf.clear()
            self._drop(c)

    def reply(self, client: _Client, message: dict) -> None:
        """Send ``message`` to ``client`` as one JSON line without blocking; a client that cannot take it (gone, or
        its socket full because it does not read) is disconnected."""
        try:
            client.sock.send((json.dumps(message) + "\n").encode())
        except OSError:
            self._drop(client)

    def _drop(self, c: _Client) -> None:
        try:
            c.sock.close()
        except OSError:
            pass
        if c in self.clients:
            self.clients.remove(c)

    def close(self) -> None:
        for c in list(self.clients):
            self._drop(c)
        self.sock.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


class Keyboard:
    """Single-key commands from a terminal (cbreak mode, non-blocking); inactive when it is not a tty.

    Args:
        fd: the terminal (default: standard input).
    """

    def __init__(self, fd: int | None = None) -> None:
        try:
            self._fd = sys.stdin.fileno() if fd is None else fd
            self.active = os.isatty(self._fd)
        except (ValueError, OSError):
            self.active = False
        self._saved = None
        if self.active:
            import termios
            import tty

            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd)
            os.set_blocking(self._fd, False)
            print("keys: " + "  ".join(f"{k!r}={v}" for k, v in KEYS.items()), file=sys.stderr, flush=True)

    def poll(self) -> list[str]:
        """Commands typed since the last poll."""
        if not self.active:
            return []
        try:
            data = os.read(self._fd, 64)
        except (BlockingIOError, OSError):
            return []
        return [KEYS[ch] for ch in data.decode(errors="ignore") if ch in KEYS]

    def close(self) -> None:
        if self.active and self._saved is not None:
            import termios

            os.set_blocking(self._fd, True)
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self.active = False
