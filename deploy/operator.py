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
itself, root, the owner of a root-created socket folder (``/run/upright-deploy``), or ``--daemon-user``.
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import socket
import stat
import struct
import sys
import tempfile
import time

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


class SocketSecurityError(Exception):
    """The socket path or its folder is not safe to use, or the peer is not who it must be."""


def _private_dir(path: str) -> bool:
    """A real folder (not a link) of this user that nobody else may enter."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def default_socket_path() -> str:
    """The operator socket both ``run`` and ``ctl`` use when ``--socket`` is not given.

    ``$UPRIGHT_DEPLOY_SOCKET``; else ``/run/upright-deploy/ctl.sock`` if that folder exists and may be entered (the
    systemd unit's RuntimeDirectory, 0750 for the daemon's user and its --ctl-group); else
    ``$XDG_RUNTIME_DIR/upright-deploy.sock`` when that folder is this user's and private (0700); else ``ctl.sock`` in
    the private folder ``<tmp>/upright-deploy-<uid>`` (created 0700 by the daemon; refused by both sides if anyone
    else owns it).
    """
    env = os.environ.get("UPRIGHT_DEPLOY_SOCKET")
    if env:
        return env
    if os.path.isdir("/run/upright-deploy") and os.access("/run/upright-deploy", os.X_OK):
        return "/run/upright-deploy/ctl.sock"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and _private_dir(xdg):
        return os.path.join(xdg, "upright-deploy.sock")
    return os.path.join(tempfile.gettempdir(), f"upright-deploy-{os.geteuid()}", "ctl.sock")


def _describe(st: os.stat_result) -> str:
    kind = ("socket" if stat.S_ISSOCK(st.st_mode) else "folder" if stat.S_ISDIR(st.st_mode)
            else "symlink" if stat.S_ISLNK(st.st_mode) else "file")  # fmt: skip
    return f"a {kind} of {_user(st.st_uid)}"


def _user(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _check_socket_dir(folder: str) -> None:
    """Create ``folder`` (0700) if missing; refuse one that another user owns or that others may write into."""
    if not os.path.lexists(folder):
        os.makedirs(os.path.dirname(folder) or ".", exist_ok=True)
        os.mkdir(folder, 0o700)
    st = os.lstat(folder)
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise SocketSecurityError(
            f"socket folder {folder} is {_describe(st)}, not a folder; remove it or choose --socket"
        )
    if st.st_uid not in (me, 0):
        raise SocketSecurityError(
            f"socket folder {folder} belongs to {_user(st.st_uid)}, not to {_user(me)}: "
            "it could replace the socket; remove the folder or choose --socket"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise SocketSecurityError(
            f"socket folder {folder} is writable by others ({stat.filemode(st.st_mode)}) "
            f"without the sticky bit: they could replace the socket; chmod go-w {folder} "
            "(connecting needs only g+x), or choose --socket"
        )
    private = os.path.join(tempfile.gettempdir(), f"upright-deploy-{me}")
    if os.path.abspath(folder) == os.path.abspath(private) and not _private_dir(folder):
        raise SocketSecurityError(
            f"socket folder {folder} must be 0700 and belong to {_user(me)}; "
            f"it is {stat.filemode(st.st_mode)} of {_user(st.st_uid)}: remove it"
        )


def prepare_socket_path(path: str) -> None:
    """Make ``path`` ready for the daemon's socket, or refuse it; call before anything moves.

    Its folder is created 0700 if missing; a stale socket of this user at ``path`` is removed.

    Raises:
        SocketSecurityError: the folder belongs to another user or others may write it; ``path`` exists and is
            not a socket of this user; or a daemon already listens on it (each message names the path).
    """
    _check_socket_dir(os.path.dirname(os.path.abspath(path)))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not (stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid()):
        raise SocketSecurityError(
            f"{path} exists and is not a socket of {_user(os.geteuid())} (it is "
            f"{_describe(st)}); remove it or choose another --socket"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:  # nobody listens: a socket left by a daemon that died
        os.unlink(path)
        return
    finally:
        probe.close()
    raise SocketSecurityError(f"another daemon already listens on {path}; stop it, or choose another --socket")


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)


def _process_groups(pid: int) -> set[int]:
    """Supplementary group ids of process ``pid`` (empty if it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return {int(g) for g in line.split()[1:]}
    except OSError:
        pass
    return set()


def resolve_group(group: str | int | None) -> int | None:
    """A group name or number as a gid (None stays None).

    Raises:
        ValueError: no such group.
    """
    if group is None or group == "":
        return None
    try:
        return int(group)
    except ValueError:
        pass
    try:
        return grp.getgrnam(str(group)).gr_gid
    except KeyError:
        raise ValueError(f"--ctl-group {group}: no such group") from None


def resolve_user(user: str | int) -> int:
    """A user name or number as a uid.

    Raises:
        ValueError: no such user.
    """
    try:
        return int(user)
    except ValueError:
        pass
    try:
        return pwd.getpwnam(str(user)).pw_uid
    except KeyError:
        raise ValueError(f"--daemon-user {user}: no such user") from None


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


class UntrustedDaemonError(ConnectionError):
    """The process serving the socket is not the expected daemon user (SO_PEERCRED)."""


def trusted_daemon_uids(path: str, daemon_users: tuple[int, ...] = ()) -> set[int]:
    """Who may serve ``path``: this user, root, ``daemon_users``, and the owner of the socket's folder when root
    made it (its parent belongs to root and only root may write there, as ``/run`` for the systemd unit's
    ``/run/upright-deploy``) and others may not write it."""
    uids = {os.geteuid(), 0, *daemon_users}
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st, parent = os.lstat(folder), os.lstat(os.path.dirname(folder))
    except OSError:
        return uids
    if stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o002 and parent.st_uid == 0 and not parent.st_mode & 0o022:
        uids.add(st.st_uid)
    return uids


def send_command(path: str, request: dict, timeout: float = 5.0, daemon_users: tuple[int, ...] = ()) -> dict:
    """Send one request to a running daemon and return its reply.

    The daemon's user is checked (SO_PEERCRED, :func:`trusted_daemon_uids`) before anything is sent.

    Raises:
        UntrustedDaemonError: another user's process serves ``path`` (the request is not sent).
        ConnectionError: no daemon listens on ``path``, or it did not answer in time.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        _, uid, _ = peer_credentials(sock)
        trusted = trusted_daemon_uids(path, daemon_users)
        if uid not in trusted:
            raise UntrustedDaemonError(
                f"refusing to talk to {path}: it is served by {_user(uid)}, not by "
                f"{', '.join(_user(u) for u in sorted(trusted))}; if the daemon runs as that user, pass --daemon-user"
            )
        sock.sendall((json.dumps(request) + "\n").encode())
        buf = b""
        while b"\n" not in buf:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"daemon at {path} closed the connection")
            buf += chunk
        return json.loads(buf.partition(b"\n")[0])
    except (FileNotFoundError, ConnectionRefusedError) as err:
        raise ConnectionError(f"no upright-deploy daemon listens on {path} ({err})") from err
    except PermissionError as err:
        raise ConnectionError(
            f"no permission to connect to {path} ({err}); the daemon's user, root and its --ctl-group may operate it"
        ) from err
    except TimeoutError as err:
        raise ConnectionError(f"daemon at {path} did not answer within {timeout} s") from err
    finally:
        sock.close()
