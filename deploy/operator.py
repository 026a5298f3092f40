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
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import sys

COMMANDS = (
    "start", "resume", "pause", "takeover", "release", "estop", "mark-success", "mark-failure", "status",
    "target", "quit",
)  # fmt: skip

KEYS = {
    "s": "start", "r": "resume", " ": "pause", "p": "pause", "t": "takeover", "l": "release", "e": "estop",
    "\x1b": "estop", "y": "mark-success", "n": "mark-failure", "q": "quit",
}  # fmt: skip
"""Keyboard bindings (single keys, no Enter needed)."""


def default_socket_path() -> str:
    """``$UPRIGHT_DEPLOY_SOCKET``, else ``/run/upright-deploy/ctl.sock`` if that folder exists, else in /tmp."""
    env = os.environ.get("UPRIGHT_DEPLOY_SOCKET")
    if env:
        return env
    if os.path.isdir("/run/upright-deploy") and os.access("/run/upright-deploy", os.W_OK):
        return "/run/upright-deploy/ctl.sock"
    return f"/tmp/upright-deploy-{os.getuid()}.sock"


class _Client:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()


class OperatorServer:
    """Non-blocking Unix-socket server polled by the control loop.

    Args:
        path: socket path (a stale socket file is replaced; the folder is created).
    """

    def __init__(self, path: str):
        self.path = path
        pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o660)
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.clients: list[_Client] = []

    def poll(self, max_requests: int = 8) -> list[tuple[dict, _Client]]:
        """Accept connections and return complete requests (at most ``max_requests``)."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, OSError):
                break
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


def send_command(path: str, request: dict, timeout: float = 5.0) -> dict:
    """Send one request to a running daemon and return its reply.

    Raises:
        ConnectionError: no daemon listens on ``path``, or it did not answer in time.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
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
    except TimeoutError as err:
        raise ConnectionError(f"daemon at {path} did not answer within {timeout} s") from err
    finally:
        sock.close()
