"""The daemon's control socket against other users' processes (issue 13.4; docs/fault_injection.md, part 2): path
checks as any user, and, as root, an impostor socket of another user refused before any port opens, ``ctl`` refusing
a daemon of another user, and a daemon answering only its user, root and its group. Split from
``test_fault_injection.py``."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest


def test_socket_path_checks_of_the_daemon(tmp_path):
    """Issue 13.4, as any user: a stale socket of ours is replaced, a live daemon's socket or a plain file is refused,
    and so is a folder its group may write (it could replace the socket; the unit's folder is 0750)."""
    from upright.deploy.operator import OperatorServer
    from upright.deploy.operator_socket import SocketSecurityError, prepare_socket_path

    path = tmp_path / "d" / "ctl.sock"
    first = OperatorServer(str(path))
    assert (path.parent.stat().st_mode & 0o777) == 0o700 and (path.stat().st_mode & 0o777) == 0o600
    with pytest.raises(SocketSecurityError, match=f"another daemon already listens on {path}"):
        OperatorServer(str(path))
    first.sock.close()  # as if the daemon died: a stale socket file stays
    assert path.exists()
    prepare_socket_path(str(path))
    assert not path.exists()
    path.write_text("not a socket")
    with pytest.raises(SocketSecurityError, match=r"exists and is not a socket of .* \(it is a file of"):
        OperatorServer(str(path))
    path.unlink()
    path.parent.chmod(0o770)
    with pytest.raises(SocketSecurityError, match="is writable by others .*chmod go-w"):
        OperatorServer(str(path))


OTHER_UID = 65534  # nobody / nogroup
SYSTEM_PYTHON = "/usr/bin/python3"  # the test's interpreter may live where nobody cannot enter (/root)
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="needs root (to run a process as another user) and /usr/bin/python3",
)

IMPOSTOR = r"""
import socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    data = c.recv(4096)
    with open(log, "ab") as f:
        f.write(data)
    c.sendall(b'{"ok": true, "mode": "DAMPING"}\n')
    c.close()
"""

CLIENT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"cmd": "estop"}\n')
buf = b""
while not buf.endswith(b"\n"):
    chunk = s.recv(4096)
    if not chunk:
        break
    buf += chunk
print(buf.decode().strip())
"""


@pytest.fixture
def shared_dir():
    """A /tmp-like folder (1777) that the other user can reach."""
    import shutil
    import tempfile

    path = pathlib.Path(tempfile.mkdtemp(prefix="upright-shared-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_other_user(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([SYSTEM_PYTHON, *args], user=OTHER_UID, group=OTHER_UID, extra_groups=[],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)  # fmt: skip


def start_impostor(path: pathlib.Path, log: pathlib.Path) -> subprocess.Popen:
    log.touch()
    log.chmod(0o666)
    proc = as_other_user("-c", IMPOSTOR, str(path), str(log))
    assert proc.stdout.readline().strip() == "ready"
    return proc


@needs_root
def test_daemon_refuses_a_socket_path_another_user_holds_before_any_port_opens(tmp_path, shared_dir, linear_policy):
    """Issue 13.4: another user bound the socket path first: the daemon refuses with one line naming the path,
    before opening the serial ports (it used to die with a traceback after opening them)."""
    impostor = start_impostor(shared_dir / "ctl.sock", shared_dir / "impostor.log")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "upright.deploy.cli", "run", "--policy", str(linear_policy), "--port-dir",
             str(tmp_path / "no-ports"), "--socket", str(shared_dir / "ctl.sock"), "--no-log", "--no-keyboard"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        impostor.kill()
        impostor.wait()
    assert out.returncode == 2, out.stderr
    assert f"{shared_dir / 'ctl.sock'} exists and is not a socket of uid 0" in out.stderr, out.stderr
    assert "serial" not in out.stderr and "Traceback" not in out.stderr  # refused before the ports


@needs_root
def test_ctl_refuses_a_daemon_of_another_user(tmp_path, shared_dir):
    """Issue 13.4: ``ctl estop`` to a socket served by another user's process is refused before anything is sent
    (it used to print the impostor's {"ok": true})."""
    impostor = start_impostor(shared_dir / "ctl.sock", shared_dir / "impostor.log")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "upright.deploy.cli", "ctl", "--socket", str(shared_dir / "ctl.sock"), "estop"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        impostor.kill()
        impostor.wait()
    assert out.returncode == 2 and out.stdout == "", out
    assert "served by uid 65534 (nobody)" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert (shared_dir / "impostor.log").read_bytes() == b""  # the request never reached it


@needs_root
def test_ctl_daemon_user_names_another_trusted_daemon_user(shared_dir):
    """Issue 13.4: ``--daemon-user`` trusts a daemon that runs as another user on purpose."""
    daemon = start_impostor(shared_dir / "ctl.sock", shared_dir / "requests.log")
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "upright.deploy.cli",
                "ctl",
                "--socket",
                str(shared_dir / "ctl.sock"),
                "--daemon-user",
                "nobody",
                "status",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        daemon.kill()
        daemon.wait()
    assert out.returncode == 0 and json.loads(out.stdout)["ok"], out
    assert b'"status"' in (shared_dir / "requests.log").read_bytes()


def serve_once(server, client: subprocess.Popen, timeout: float = 20.0) -> list:
    """Poll ``server`` (and answer what it accepts) until ``client`` exits; return the accepted requests."""
    got = []
    deadline = time.monotonic() + timeout
    while client.poll() is None and time.monotonic() < deadline:
        for req, c in server.poll():
            got.append(req)
            server.reply(c, {"ok": True, "mode": "DAMPING"})
        time.sleep(0.01)
    return got


@needs_root
@pytest.mark.parametrize("group", [None, OTHER_UID], ids=["no-group", "ctl-group"])
def test_daemon_answers_only_its_user_root_and_its_group(shared_dir, group):
    """Issue 13.4: SO_PEERCRED on the daemon's side: even through a socket file others may open (0666 here), another
    user's request is refused unless that user is in --ctl-group."""
    from upright.deploy.operator import OperatorServer

    server = OperatorServer(str(shared_dir / "d" / "ctl.sock"), group=group)
    (shared_dir / "d").chmod(0o755)
    (shared_dir / "d" / "ctl.sock").chmod(0o666)
    try:
        client = as_other_user("-c", CLIENT, str(shared_dir / "d" / "ctl.sock"))
        got = serve_once(server, client)
        reply = json.loads(client.communicate(timeout=20)[0])
    finally:
        server.close()
    if group is None:
        assert got == [] and server.refused == 1
        assert reply == {"ok": False, "error": "uid 65534 (nobody) may not operate this daemon"}
    else:
        assert got == [{"cmd": "estop"}] and reply["ok"]


@needs_root
def test_default_socket_is_private_and_a_hijacked_fallback_folder_is_refused(tmp_path, shared_dir, linear_policy):
    """Issue 13.4: the default socket is in $XDG_RUNTIME_DIR; without it, in a private <tmp>/upright-deploy-<uid>
    folder, which the daemon refuses when another user created it first."""
    from upright.deploy.operator_socket import default_socket_path

    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("UPRIGHT_DEPLOY_SOCKET", "XDG_RUNTIME_DIR")}
    code = "from upright.deploy.operator_socket import default_socket_path as d; print(d())"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "XDG_RUNTIME_DIR": str(xdg)}, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == str(xdg / "upright-deploy.sock")
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, "TMPDIR": str(shared_dir)}, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(shared_dir / "upright-deploy-0" / "ctl.sock")
    assert default_socket_path()  # and in this process, whatever its environment
    squatter = as_other_user("-c", f"import os; os.mkdir({str(shared_dir / 'upright-deploy-0')!r}, 0o777)")
    assert squatter.wait(20) == 0
    out = subprocess.run(
        [sys.executable, "-m", "upright.deploy.cli", "run", "--policy", str(linear_policy), "--port-dir",
         str(tmp_path / "no-ports"), "--no-log", "--no-keyboard"],
        env={**env, "TMPDIR": str(shared_dir)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "belongs to uid 65534 (nobody)" in out.stderr and "serial" not in out.stderr, (
        out.stderr
    )


@needs_root
def test_ctl_trusts_the_daemon_user_of_a_root_made_folder(tmp_path):
    """Issue 13.4: the systemd layout: /run/upright-deploy is made by root for the service user; an operator's ctl
    talks to a daemon running as that user (here nobody) without extra flags."""
    import shutil
    import tempfile

    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="upright-run-", dir="/tmp"))  # like /run: root, 0755
    try:
        run_dir.chmod(0o755)
        svc = run_dir / "upright-deploy"
        svc.mkdir(mode=0o770)
        os.chown(svc, OTHER_UID, OTHER_UID)
        daemon = start_impostor(svc / "ctl.sock", svc / "requests.log")  # a legitimate daemon running as nobody
        try:
            out = subprocess.run([sys.executable, "-m", "upright.deploy.cli", "ctl", "--socket", str(svc / "ctl.sock"),
                                  "status"], capture_output=True, text=True, timeout=30)  # fmt: skip
            assert out.returncode == 0 and json.loads(out.stdout)["ok"], out
        finally:
            daemon.kill()
            daemon.wait()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
