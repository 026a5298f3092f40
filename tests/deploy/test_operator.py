"""The operator channel without a robot: socket requests/replies, bad input of a client, and keyboard keys from a
terminal."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from upright.deploy.operator import MAX_JSON_DEPTH, MAX_LINE_BYTES, Keyboard, OperatorServer
from upright.deploy.operator_socket import send_command


def test_socket_round_trip(tmp_path):
    server = OperatorServer(str(tmp_path / "ctl.sock"))
    replies = {}

    def client():
        replies["a"] = send_command(str(tmp_path / "ctl.sock"), {"cmd": "pause"}, timeout=5)

    t = threading.Thread(target=client)
    t.start()
    got = []
    for _ in range(500):
        got += server.poll()
        if got:
            break
        threading.Event().wait(0.01)
    ((req, c),) = got
    assert req == {"cmd": "pause"}
    server.reply(c, {"ok": True, "mode": "PAUSED"})
    t.join(5)
    assert replies["a"] == {"ok": True, "mode": "PAUSED"}
    server.close()
    assert not (tmp_path / "ctl.sock").exists()
    with pytest.raises(ConnectionError, match="no upright-deploy daemon"):
        send_command(str(tmp_path / "ctl.sock"), {"cmd": "status"}, timeout=1)


def test_keyboard_keys_from_a_terminal():
    master, slave = os.openpty()
    kb = Keyboard(slave)
    try:
        assert kb.active and kb.poll() == []
        os.write(master, b"st x")
        assert kb.poll() == ["start", "takeover", "pause"]
    finally:
        kb.close()
        os.close(master)
        os.close(slave)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        assert not Keyboard(null).active
    finally:
        os.close(null)


# ---------------------------------------------------------------- bad input (issue 33.1)
class RawClient:
    """A client of the test on a real Unix socket, non-blocking, driven with the server in one thread: what it sends
    goes out as the server reads (a line longer than the socket's buffer needs several polls)."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.outbox = b""
        self.inbox = b""
        self.closed_by_server = False

    def send(self, data: bytes) -> None:
        self.outbox += data

    def pump(self) -> None:
        if self.outbox:
            try:
                self.outbox = self.outbox[self.sock.send(self.outbox) :]
            except BlockingIOError:
                pass
            except OSError:  # the server closed the connection: the rest cannot go out
                self.outbox = b""
        while not self.closed_by_server:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            self.inbox += data
            self.closed_by_server = not data

    def replies(self) -> list[dict]:
        return [json.loads(line) for line in self.inbox.split(b"\n")[:-1]]


def serve(server: OperatorServer, clients: list[RawClient], until, timeout: float = 10.0) -> list[dict]:
    """Poll ``server`` as the daemon does (answering each request ``{"ok": true, "cmd": ...}``) until ``until()`` holds;
    the requests it returned. Fails after ``timeout`` s (generous: the machine may be loaded). Every poll must be
    non-blocking and the server's buffers stay within their cap."""
    served = []
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, ("timed out", [c.inbox[-300:] for c in clients], served)
        for c in clients:
            c.pump()
        t0 = time.monotonic()
        got = server.poll()
        assert time.monotonic() - t0 < 1.0, "poll blocked"
        assert all(len(c.buf) <= MAX_LINE_BYTES + 1 for c in server.clients)
        for req, client in got:
            served.append(req)
            server.reply(client, {"ok": True, "cmd": req["cmd"]})
        time.sleep(0.002)
    for c in clients:
        c.pump()
    return served


def assert_refused(server, client, *lines: bytes, error: str) -> None:
    """Each of ``lines`` gets exactly one error line naming ``error``; none is returned as a request."""
    before = len(client.replies())
    client.send(b"".join(lines))
    served = serve(server, [client], lambda: len(client.replies()) >= before + len(lines) or client.closed_by_server)
    new = client.replies()[before:]
    assert served == [] and len(new) == len(lines), (served, new)
    for reply in new:
        assert reply["ok"] is False and reply["error"].startswith("bad request: ") and error in reply["error"], reply


def assert_still_serves(server, client) -> None:
    """A valid ``status`` afterwards is returned by ``poll`` and its reply reaches the client."""
    before = len(client.replies())
    client.send(b'{"cmd": "status"}\n')
    served = serve(server, [client], lambda: len(client.replies()) > before)
    assert served == [{"cmd": "status"}] and client.replies()[before:] == [{"ok": True, "cmd": "status"}]


@pytest.fixture
def server(tmp_path):
    s = OperatorServer(str(tmp_path / "ctl.sock"), line_timeout_s=0.3)
    yield s
    s.close()


def test_deep_nesting_is_one_error_line_not_a_recursion_error(server):
    """Before: ``[`` * 3000 made ``RecursionError`` escape ``poll`` (the daemon damped and exited). Nesting deeper than
    MAX_JSON_DEPTH, also inside a request, is refused before parsing."""
    c = RawClient(server.path)
    deep_target = b'{"cmd": "target", "targets": {"j0": ' + b"[" * 20 + b"1" + b"]" * 20 + b"}}\n"
    assert_refused(
        server,
        c,
        b"[" * 3000 + b"\n",
        b'{"cmd": ' + b"{" * 5000 + b"\n",
        deep_target,
        error=f"nested deeper than {MAX_JSON_DEPTH} levels",
    )
    assert_still_serves(server, c)
    c.send(b'{"cmd": "target", "targets": {"j[[[[[[[[[[": 0.1}}\n')  # brackets inside a string do not count
    assert serve(server, [c], lambda: len(c.replies()) >= 5) == [{"cmd": "target", "targets": {"j[[[[[[[[[[": 0.1}}]


def test_over_long_line_is_one_error_line_and_a_disconnect(server):
    """Before: no cap, the server held every byte of an unfinished line (1 MiB sent: 1 MiB buffered) and never answered.
    Now the line gets one error line, the client is disconnected, its buffer dropped; a line of exactly the cap is
    accepted."""
    c = RawClient(server.path)
    c.send(b"x" * (1 << 20))
    serve(server, [c], lambda: c.closed_by_server)
    (reply,) = c.replies()
    assert reply == {
        "ok": False,
        "error": f"bad request: line longer than {MAX_LINE_BYTES} bytes (no newline); connection closed",
    }
    assert server.clients == []
    longest = b'{"cmd": "status"}'.ljust(MAX_LINE_BYTES) + b"\n"
    d = RawClient(server.path)
    d.send(longest)
    assert serve(server, [d], lambda: d.replies()) == [{"cmd": "status"}]
    assert_still_serves(server, d)


def test_bytes_that_are_not_utf8_are_one_error_line(server):
    """Before: invalid UTF-8 got a parser message, but UTF-16/32 with a byte-order mark was decoded and applied as a
    request. Now any line that is not UTF-8 is refused, naming the byte."""
    c = RawClient(server.path)
    assert_refused(
        server,
        c,
        b'{"cmd": "\xff\xfe"}\n',
        b"\xc3\x28\n",
        b'{"cmd": "\xed\xa0\x80"}\n',
        b"\xff\xfe" + '{"cmd": "estop"}'.encode("utf-16-le") + b"\n",
        '{"cmd": "estop"}'.encode("utf-32") + b"\n",
        error="not UTF-8",
    )
    assert_still_serves(server, c)


def test_json_that_is_not_an_object_is_one_error_line(server):
    """A request is one JSON object with a string ``cmd``; arrays, numbers, strings, null, booleans and text that is not
    JSON are refused here and never reach the controller."""
    c = RawClient(server.path)
    assert_refused(
        server, c, b"[1]\n", b"5\n", b'"status"\n', b"null\n", b"true\n", error="a request is one JSON object"
    )
    assert_refused(server, c, b"{\n", b"status\n", b"\n", b"1" * 5000 + b"\n", error="not JSON")
    assert_refused(server, c, b"{}\n", b'{"cmd": 5}\n', b'{"cmd": ["status"]}\n', error="'cmd' must be a string")
    assert_still_serves(server, c)


def test_unknown_fields_are_one_error_line_and_nothing_is_applied(server):
    """Before: unknown fields were ignored and the command applied (``{"cmd": "estop", "force": true}`` stopped the
    robot). Now the whole request is refused, naming the field and the valid ones."""
    c = RawClient(server.path)
    assert_refused(server, c, b'{"cmd": "estop", "force": true}\n', b'{"command": "status"}\n', error="unknown field")
    assert c.replies()[0]["error"] == "bad request: unknown field 'force'; fields: cmd, targets"
    assert_refused(server, c, b'{"cmd": "pause", "targets": {"j0": 0.1}}\n', error="'targets' goes with cmd 'target'")
    assert_still_serves(server, c)


def test_unfinished_line_blocks_nobody_and_times_out(server):
    """A client that starts a line and does not finish it does not hold up the others (``poll`` never blocks); it may
    still finish it, and if it leaves it unfinished for ``line_timeout_s`` it gets one error line and is disconnected.
    Before: such a client was held forever with no reply."""
    slow, other = RawClient(server.path), RawClient(server.path)
    slow.send(b'{"cmd": "sta')
    other.send(b'{"cmd": "pause"}\n')
    assert serve(server, [slow, other], lambda: other.replies()) == [{"cmd": "pause"}]
    assert slow.replies() == [] and not slow.closed_by_server
    slow.send(b'tus"}\n')  # finished within line_timeout_s: served
    assert serve(server, [slow, other], lambda: slow.replies()) == [{"cmd": "status"}]
    slow.send(b'{"cmd": "st')
    t0 = time.monotonic()
    served = serve(server, [slow, other], lambda: slow.closed_by_server)
    assert served == [] and time.monotonic() - t0 >= server.line_timeout_s
    assert slow.replies()[-1] == {
        "ok": False,
        "error": "bad request: line left unfinished for more than 0.3 s (end "
        "each request with a newline); connection closed",
    }
    assert len(server.clients) == 1  # only the other client is left
    assert_still_serves(server, other)
