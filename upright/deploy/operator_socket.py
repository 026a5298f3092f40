"""The operator socket's security and its client: where the socket lives, the checks of its folder and of both ends
(SO_PEERCRED), user and group names, and :func:`send_command` (what ``upright-deploy ctl`` sends).
:mod:`upright.deploy.operator` (the server side) describes the rules ("Security")."""

from __future__ import annotations

import grp
import json
import os
import pwd
import socket
import stat
import struct
import tempfile


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
