"""Issue 33 §5: the policy server stays bounded and closed under any client (``upright/vla/server_guard.py``).

Real websockets on loopback: an in-process :class:`~upright.vla.server_thread.BackgroundServer`, or
``upright-policy-server`` in its own process where its memory is measured; the real openpi-client 0.1.2
(``WebsocketClientPolicy``) wherever interoperability is the point (error replies, the API key header). Rows 33.5 of
``docs/fault_injection.md``.
"""

from __future__ import annotations

import http.client
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import msgpack
import numpy as np
import pytest

from upright.vla.linear import LinearChunkPolicy
from upright.vla.server import PolicyServer
from upright.vla.server_guard import API_KEY_ENV, DEFAULT_MAX_MESSAGE_BYTES
from upright.vla.server_thread import BackgroundServer

ws_client = pytest.importorskip(
    "openpi_client.websocket_client_policy",
    reason="openpi-client not installed: pip install --no-deps openpi-client==0.1.2",
)
from openpi_client import msgpack_numpy  # noqa: E402  (after the skip)
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

S = 5


def _policy() -> LinearChunkPolicy:
    return LinearChunkPolicy(state_dim=S, chunk_size=6, action_dim=4, cameras=("front",), seed=3)


def _obs(image: np.ndarray | None = None, **extra) -> dict:
    """A valid openpi observation for :func:`_policy` (its image: 8 x 8 unless given)."""
    image = np.zeros((8, 8, 3), np.uint8) if image is None else image
    return {"observation/state": np.linspace(-1, 1, S), "observation/image": image, "prompt": "lift", **extra}


def _client(server, **kwargs):
    return ws_client.WebsocketClientPolicy("127.0.0.1", server.port, **kwargs)


def _serves(client, shape: tuple[int, int] = (6, 4)) -> bool:
    """The client's connection still gets actions (of ``shape``) for a valid request."""
    return client.infer(_obs())["actions"].shape == shape


def test_oversize_message_is_refused_and_the_server_serves_others(caplog):
    policy = _policy()
    with BackgroundServer(policy, max_message_bytes=64 * 1024) as server:
        other, big = _client(server), _client(server)
        assert big.get_server_metadata()["max_message_bytes"] == 64 * 1024
        assert _serves(big) and big.infer(_obs(np.zeros((140, 140, 3), np.uint8)))  # 58.8 kB: under the limit
        with caplog.at_level(logging.WARNING, logger="upright.vla.server"), pytest.raises(ConnectionClosed) as e:
            big.infer(_obs(np.zeros((200, 200, 3), np.uint8)))  # 120 kB
        assert e.value.rcvd is None or e.value.rcvd.code == 1009  # "message too big"
        assert _serves(other) and _serves(_client(server))
        assert any("--max-message-bytes 65536" in r.getMessage() for r in caplog.records)
    assert PolicyServer(policy).max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 4 * 2**20
    with BackgroundServer(LinearChunkPolicy(S, 6, 4, cameras=("front", "wrist"))) as server:  # the default limit
        client = _client(server)
        vga = np.zeros((480, 640, 3), np.uint8)  # 2 VGA frames (1.8 MB) pass; 6.3 MB do not
        two_vga = {**_obs(vga), "observation/wrist_image": vga}
        assert client.infer(two_vga)["actions"].shape == (6, 4)
        with pytest.raises(ConnectionClosed):
            client.infer({**_obs(np.zeros((1200, 1500, 3), np.uint8)), "observation/wrist_image": vga})
        assert _client(server).infer(two_vga)["actions"].shape == (6, 4)


@pytest.mark.parametrize(
    "bad",
    [
        {"observation/state": np.array([0.0, np.nan, 1.0, 2.0, 3.0])},
        {"observation/state": np.array([np.inf, 0, 0, 0, 0], np.float32)},
        {"observation/image": np.full((8, 8, 3), -np.inf, np.float32)},
        {"extra/unused": np.array([[np.nan]], np.float16)},
        {"extra/scalar": np.float32("nan")},
        {"extra/nested": {"deep": [1.0, float("inf")]}},
    ],
    ids=["nan-state", "inf-state-f32", "neg-inf-float-image", "nan-unused-key-f16", "nan-scalar", "inf-nested-list"],
)
def test_non_finite_values_are_a_bad_request_and_the_connection_goes_on(bad):
    with BackgroundServer(_policy()) as server:
        client = _client(server)
        with pytest.raises(RuntimeError, match=r"bad request: .*non-finite|bad request: .*\(NaN or inf\)") as e:
            client.infer({**_obs(), **bad})
        assert str(e.value).count("\n") == 1 and "Traceback" not in str(e.value)  # openpi's prefix line + ours
        assert _serves(client)


def _packed_array(dtype, shape, data=b"\0" * 20) -> dict:
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


MALFORMED = {
    "dtype-unknown": msgpack.packb({"observation/state": _packed_array("foo", [5])}),
    "dtype-not-a-string": msgpack.packb({"observation/state": _packed_array(5, [5])}),
    "dtype-structured": msgpack.packb({"observation/state": _packed_array([["a", "<f4"]], [5])}),
    "dtype-object": msgpack.packb({"observation/state": _packed_array("|O", [2])}),
    "array-without-shape": msgpack.packb({"observation/state": {b"__ndarray__": True, b"data": b"", b"dtype": "<f4"}}),
    "shape-larger-than-data": msgpack.packb({"observation/state": _packed_array("<f4", [1000])}),
    "shape-not-a-list": msgpack.packb({"observation/state": _packed_array("<f4", "5")}),
    "scalar-bad-dtype": msgpack.packb({"x": {b"__npgeneric__": True, b"data": 1, b"dtype": "nope"}}),
    "scalar-bad-data": msgpack.packb({"x": {b"__npgeneric__": True, b"data": "x", b"dtype": "<f4"}}),
    "not-msgpack": b"\xc1",
    "truncated": msgpack_numpy.packb(_obs())[:-7],
    "trailing-bytes": msgpack_numpy.packb(_obs()) + b"\x00",
    "a-list": msgpack.packb([1, 2, 3]),
    "an-int": msgpack.packb(7),
    "int-map-key": msgpack.packb({1: 2}),
    "state-2d": msgpack_numpy.packb(_obs() | {"observation/state": np.zeros((2, S))}),
    "state-strings": msgpack_numpy.packb(_obs() | {"observation/state": np.array(["a"] * S)}),
    "image-4-channels": msgpack_numpy.packb(_obs(np.zeros((8, 8, 4), np.uint8))),
    "no-state": msgpack_numpy.packb({"observation/image": np.zeros((8, 8, 3), np.uint8)}),
    "text-frame": "observation please",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_request_gets_one_line_no_traceback_and_the_connection_goes_on(name, caplog):
    with BackgroundServer(_policy()) as server, caplog.at_level(logging.WARNING, logger="upright.vla.server"):
        client = _client(server)
        client._ws.send(MALFORMED[name])  # WebsocketClientPolicy.infer would pack it: send the bytes as they are
        reply = client._ws.recv(timeout=60)
        assert isinstance(reply, str) and reply.startswith("bad request: "), reply  # openpi's error: a text frame
        assert "\n" not in reply and "Traceback" not in reply and len(reply) <= 300
        assert _serves(client)
    logged = [r for r in caplog.records if r.name == "upright.vla.server" and r.levelno >= logging.WARNING]
    assert len(logged) == 1 and logged[0].exc_info is None and "\n" not in logged[0].getMessage()


def _rss_mb(pid: int) -> float:
    """Resident set size of process ``pid``, MB (``VmRSS`` of ``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024.0


@contextmanager
def _server_process(*args: str):
    """``python -m upright.vla.server ARGS --port 0`` in its own process: (process, port, its stderr lines so far)."""
    cmd = [sys.executable, "-m", "upright.vla.server", *args, "--port", "0"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines: list[str] = []
    found = threading.Event()

    def drain():
        for line in proc.stderr:
            lines.append(line)
            if " on ws://" in line:
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        found.wait(timeout=240)
        m = next((re.search(r"on ws://127\.0\.0\.1:(\d+)", x) for x in lines if " on ws://" in x), None)
        assert m, f"the server did not report its port: {''.join(lines)[-2000:]}"
        yield proc, int(m.group(1)), lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the server's VmRSS from /proc")
def test_a_client_that_never_reads_its_replies_is_bounded_then_dropped():
    """A client sends 1.05 MB requests (up to 500) and never reads the 256 kB replies. Before: the server read them
    all into its unbounded inbox (RSS up by ~the bytes sent). After: its sends block once the bounded inbox and the
    socket buffers are full, and the server drops it after --send-timeout 2 s; another client is served all along."""
    import websockets.sync.client

    policy = [
        "--policy",
        "upright.vla.linear:make_linear_policy",
        "--arg",
        f"state_dim={S}",
        "--arg",
        "chunk_size=512",
        "--arg",
        "action_dim=128",
        "--arg",
        "cameras=front",
    ]
    with _server_process(*policy, "--send-timeout", "2") as (proc, port, lines):
        other = ws_client.WebsocketClientPolicy("127.0.0.1", port)
        big = msgpack_numpy.packb(_obs(np.full((592, 592, 3), 7, np.uint8)))  # 1,051,392 bytes of image
        for _ in range(3):  # the server's memory for answering such requests is in the baseline
            assert other.infer(msgpack_numpy.unpackb(big))["actions"].shape == (512, 128)
        base = _rss_mb(proc.pid)
        outcome: dict = {"sent": 0}

        def flood():
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # before connect: a small receive window
            sock.connect(("127.0.0.1", port))
            ws = websockets.sync.client.connect(
                f"ws://127.0.0.1:{port}", sock=sock, compression=None, max_size=None, max_queue=1
            )
            try:
                while outcome["sent"] < 500:
                    ws.send(big)
                    outcome["sent"] += 1
            except Exception as e:  # noqa: BLE001  (the drop)
                outcome["error"] = e
            finally:
                sock.close()

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        peak, served, deadline = base, 0, time.monotonic() + 20
        while flooder.is_alive() and time.monotonic() < deadline:
            peak = max(peak, _rss_mb(proc.pid))
            served += _serves(other, (512, 128))  # the flooder does not block the others
            time.sleep(0.05)
        flooder.join(timeout=5)
        peak = max(peak, _rss_mb(proc.pid))
        print(f"RSS {base:.0f} -> peak {peak:.0f} MB; {outcome}; others served {served} times")
        assert peak - base < 100, (
            f"server RSS grew {peak - base:.0f} MB ({base:.0f} -> {peak:.0f}); {outcome['sent']} requests sent"
        )
        assert "error" in outcome and outcome["sent"] < 200, outcome  # dropped, not read to the end
        assert served > 0 and _serves(other, (512, 128))
        assert _serves(ws_client.WebsocketClientPolicy("127.0.0.1", port), (512, 128))
        assert _rss_mb(proc.pid) - base < 100
        time.sleep(0.2)
        dropped = [x for x in lines if "has not read its replies for 2.0 s" in x]
        assert len(dropped) == 1 and "Traceback" not in "".join(lines), "".join(lines)[-3000:]


@pytest.fixture
def busy_port():
    """A port a listening socket holds."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def _not_onnx(tmp_path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(b"this is not a model\n" * 10)
    return str(path)


LINEAR = ["--policy", "upright.vla.linear:make_linear_policy", "--arg", f"state_dim={S}"]
CLI_MISTAKES = {
    "port-too-large": (LINEAR + ["--port", "70000"], "'70000' is not a TCP port"),
    "port-negative": (LINEAR + ["--port", "-1"], "is not a TCP port"),
    "port-not-a-number": (LINEAR + ["--port", "http"], "is not a TCP port"),
    "port-in-use": (LINEAR + ["--port", "BUSY"], "cannot listen on 127.0.0.1:"),
    "host-not-here": (LINEAR + ["--host", "192.0.2.1", "--port", "0"], "cannot listen on 192.0.2.1:0"),
    "policy-missing-onnx": (["--policy", "TMP/missing.onnx"], "no such file or folder"),
    "policy-not-onnx": (["--policy", "TMP/garbage.onnx"], "cannot load --policy"),
    "policy-not-a-checkpoint": (["--policy", "TMP/garbage.pt"], "cannot load --policy"),
    "policy-bad-factory-arg": (LINEAR + ["--arg", "state_dim=five"], "cannot load --policy"),
    "arg-without-equals": (LINEAR + ["--arg", "state_dim"], "write KEY=VALUE"),
    "max-message-bytes-zero": (LINEAR + ["--max-message-bytes", "0"], "give an integer > 0"),
    "send-timeout-negative": (LINEAR + ["--send-timeout", "-1"], "give a number > 0"),
    "send-timeout-nan": (LINEAR + ["--send-timeout", "nan"], "give a number > 0"),
    "api-key-empty": (LINEAR + ["--api-key", " "], "--api-key is empty"),
    "log-level-unknown": (LINEAR + ["--log-level", "chatty"], "--log-level 'chatty'"),
    "unknown-option": (LINEAR + ["--bogus"], "unrecognized arguments: --bogus"),
    "no-policy": ([], "the following arguments are required: --policy"),
}


@pytest.mark.parametrize("name", list(CLI_MISTAKES))
def test_cli_mistakes_are_one_line_and_exit_2(name, tmp_path, busy_port, capsys):
    from upright.vla.server import main

    argv, expected = CLI_MISTAKES[name]
    _not_onnx(tmp_path, "garbage.onnx")
    _not_onnx(tmp_path, "garbage.pt")
    argv = [a.replace("TMP", str(tmp_path)).replace("BUSY", str(busy_port)) for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err.startswith("upright-policy-server: error: ") and err.count("\n") == 1, err
    assert expected in err and "Traceback" not in err


def test_non_loopback_bind_warns_naming_the_api_key_option(caplog):
    with caplog.at_level(logging.WARNING, logger="upright.vla.server"):
        with BackgroundServer(_policy()):
            pass
        assert not caplog.records  # 127.0.0.1: no warning
        with BackgroundServer(_policy(), host="0.0.0.0") as server:
            assert _serves(_client(server))
        (warning,) = caplog.records
        assert warning.levelno == logging.WARNING and "0.0.0.0" in warning.getMessage()
        assert "NO authentication" in warning.getMessage() and "--api-key" in warning.getMessage()
        caplog.clear()
        with BackgroundServer(_policy(), host="0.0.0.0", api_key="k"):
            pass
        (warning,) = caplog.records
        assert "clear text" in warning.getMessage() and "--api-key" in warning.getMessage()


def test_api_key_is_checked_at_the_handshake_with_the_real_openpi_client(monkeypatch):
    from upright.vla.remote import RemotePolicy
    from upright.vla.server_cli import parse_args

    key = "k3y-0f-the-s3rver"
    with BackgroundServer(_policy(), api_key=key) as server:
        assert _serves(_client(server, api_key=key))  # openpi-client sends "Authorization: Api-Key <key>"
        for api_key, status in ((None, 401), ("wrong", 403), (key + "x", 403), (key[:-1], 403)):
            with pytest.raises(InvalidStatus) as e:
                _client(server, api_key=api_key)
            assert e.value.response.status_code == status
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200  # no key needed
        monkeypatch.delenv(API_KEY_ENV, raising=False)
        with pytest.raises(ConnectionError, match=f"HTTP 401: no API key sent.*{API_KEY_ENV}"):
            RemotePolicy(port=server.port, timeout=60)
        with RemotePolicy(port=server.port, timeout=60, api_key=key) as remote:
            assert remote.chunk_size == 6
        monkeypatch.setenv(API_KEY_ENV, key)
        with RemotePolicy(port=server.port, timeout=60) as remote:  # the key from the environment
            assert remote.chunk_size == 6
    assert parse_args(LINEAR).api_key == key  # the server's key from the environment too
    assert parse_args(LINEAR + ["--api-key", "other"]).api_key == "other"
    monkeypatch.delenv(API_KEY_ENV)
    assert parse_args(LINEAR).api_key is None
