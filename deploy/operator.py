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
    systemd unit's RuntimeDirectory, 0750 for the daemon's user and its --ctl-group); else ``$XDG_RUNTIME_DIR/upright-deploy.sock`` when that folder is this
    user's and private (0700); else ``ctl.sock`` in the private folder ``<tmp>/upright-deploy-<uid>`` (created
    0700 by the daemon; refused by both sides if anyone else owns it).
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
        raise SocketSecurityError(f"socket folder {folder} is {_describe(st)}, not a folder; remove it or choose --socket")
    if st.st_uid not in (me, 0):
        raise SocketSecurityError(f"socket folder {folder} belongs to {_user(st.st_uid)}, not to {_user(me)}: "
                                  "it could replace the socket; remove the folder or choose --socket")  # fmt: skip
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise SocketSecurityError(f"socket folder {folder} is writable by others ({stat.filemode(st.st_mode)}) "
                                  f"without the sticky bit: they could replace the socket; chmod go-w {folder} "
                                  "(connecting needs only g+x), or choose --socket")  # fmt: skip
    private = os.path.join(tempfile.gettempdir(), f"upright-deploy-{me}")
    if os.path.abspath(folder) == os.path.abspath(private) and not _private_dir(folder):
        raise SocketSecurityError(f"socket folder {folder} must be 0700 and belong to {_user(me)}; "
                                  f"it is {stat.filemode(st.st_mode)} of {_user(st.st_uid)}: remove it")  # fmt: skip


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
        raise SocketSecurityError(f"{path} exists and is not a socket of {_user(os.geteuid())} (it is "
                                  f"{_describe(st)}); remove it or choose another --socket")  # fmt: skip
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


class OperatorServer:
    """Non-blocking Unix-socket server polled by the control loop.

    Args:
        path: socket path, checked by :func:`prepare_socket_path` (a stale socket of this user is replaced; the
            folder is created 0700).
        group: gid whose members may also send commands (None: only this user and root). The socket is made
            0660 and given this group when possible.

    Raises:
        SocketSecurityError: see :func:`prepare_socket_path`, or another process took the path meanwhile.
    """

    def __init__(self, path: str, group: int | None = None):
        self.path = path
        self.group = group
        self.refused = 0
        """Connections refused because the peer was not allowed."""
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
                log.warning("socket %s: cannot give it group %d (%s); only its user and root can connect", path, group, err)
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.clients: list[_Client] = []

    def allowed(self, pid: int, uid: int, gid: int) -> bool:
        """This daemon's user, root, or (with ``group``) a process in that group."""
        if uid in (os.geteuid(), 0):
            return True
        return self.group is not None and (gid == self.group or self.group in _process_groups(pid))

    def poll(self, max_requests: int = 8) -> list[tuple[dict, _Client]]:
        """Accept connections and return complete requests (at most ``max_requests``)."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, OSError):
                break
            pid, uid, gid = peer_credentials(conn)
            if not self.allowed(pid, uid, gid):
                self.refused += 1
                log.warning("operator socket: refused pid %d, %s (allowed: %s, root%s)", pid, _user(uid),
                            _user(os.geteuid()), f", group {self.group}" if self.group is not None else "")
                try:
                    conn.send((json.dumps({"ok": False, "error": f"{_user(uid)} may not operate this daemon"}) + "\n")
                              .encode())  # fmt: skip
                except OSError:
                    pass
                conn.close()
                continue
            conn.setblocking(False)
            self.clients.append(_Client(conn))
        out: list[tuple[dict, _Client]] = []
        for c in list(self.clients):
            try:
                data = c.sock.recv(4096)
                if not data:
                    self._drop(c)
                    continue
                c.buf += data
            except BlockingIOError:
                pass
            except OSError:
                self._drop(c)
                continue
            while b"\n" in c.buf and len(out) < max_requests:
                line, _, rest = bytes(c.buf).partition(b"\n")
                c.buf = bytearray(rest)
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict):
                        raise ValueError("not an object")
                except ValueError as err:
                    self.reply(c, {"ok": False, "error": f"bad request: {err}"})
                    continue
                out.append((req, c))
        return out

    def reply(self, client: _Client, message: dict) -> None:
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
            )  # fmt: skip
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
        raise ConnectionError(f"no permission to connect to {path} ({err}); the daemon's user, root and its "
                              "--ctl-group may operate it") from err  # fmt: skip
    except TimeoutError as err:
        raise ConnectionError(f"daemon at {path} did not answer within {timeout} s") from err
    finally:
        sock.close()
