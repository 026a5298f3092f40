"""The operator channel without a robot: socket requests/replies, and keyboard keys from a terminal."""

from __future__ import annotations

import os
import threading

import pytest

from upright.deploy.operator import Keyboard, OperatorServer, send_command


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
    (req, c), = got
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
