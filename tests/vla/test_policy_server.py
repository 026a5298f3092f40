"""The openpi policy server on loopback: our client and the real openpi-client package against a real websocket.

openpi-client 0.1.2 pins numpy<2 but is installed with ``pip install --no-deps openpi-client==0.1.2`` (README's test
command): ``WebsocketClientPolicy`` imports only ``typing_extensions``, ``websockets.sync.client`` and its own
``msgpack_numpy`` (``msgpack`` + numpy: ``ndarray``/``generic`` checks, ``dtype.kind``/``dtype.str``, ``tobytes``,
``np.ndarray(buffer=...)``, ``np.dtype(...).type(...)``, all unchanged in numpy 2); dm-tree (``action_chunk_broker``)
and pillow (``image_tools``) are not imported on that path. These tests are what shows it works on numpy 2.
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from upright.vla.linear import LinearChunkPolicy
from upright.vla.policy import ChunkPolicy
from upright.vla.remote import RemotePolicy
from upright.vla.server_thread import BackgroundServer

OPENPI_SKIP = "openpi-client not installed: pip install --no-deps openpi-client==0.1.2 (README's test command)"
H, A, S = 6, 4, 5


def _policy() -> LinearChunkPolicy:
    return LinearChunkPolicy(state_dim=S, chunk_size=H, action_dim=A, cameras=("front", "wrist"), seed=3)


def _obs(rng: np.random.Generator, prompt: str = "pick up the red cube") -> dict:
    """One openpi observation (openpi's LIBERO keys and layout: (H, W, 3) uint8 images)."""
    return {
        "observation/image": rng.integers(0, 256, (12, 10, 3), dtype=np.uint8),
        "observation/wrist_image": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8),
        "observation/state": rng.normal(size=S),
        "prompt": prompt,
    }


def _expected(policy: LinearChunkPolicy, obs: dict) -> np.ndarray:
    """(H, A): the linear map computed here with numpy from the openpi observation (independent of the key map)."""
    f = np.concatenate(
        [
            obs["observation/state"],
            obs["observation/image"][0, 1] / 255.0,
            obs["observation/wrist_image"][0, 1] / 255.0,
            [len(obs["prompt"]) / 100.0],
        ]
    )
    return (policy.weight.double().numpy() @ f + policy.bias.double().numpy()).reshape(H, A)


def _to_batch(obs_list: list[dict]) -> dict:
    """A LeRobot batch (B, ...) of the observations, CHW images."""
    return {
        "observation.state": torch.tensor(np.stack([o["observation/state"] for o in obs_list]), dtype=torch.float32),
        "observation.images.front": torch.from_numpy(np.stack([o["observation/image"] for o in obs_list]))
        .permute(0, 3, 1, 2)
        .contiguous(),
        "observation.images.wrist": torch.from_numpy(np.stack([o["observation/wrist_image"] for o in obs_list]))
        .permute(0, 3, 1, 2)
        .contiguous(),
        "task": [o["prompt"] for o in obs_list],
    }


def test_remote_policy_gets_the_served_policys_chunks_for_a_batch():
    policy, rng = _policy(), np.random.default_rng(0)
    obs = [_obs(rng, "pick"), _obs(rng, "pick up the cube"), _obs(rng, "lift")]
    with BackgroundServer(policy) as server, RemotePolicy(port=server.port, timeout=60) as remote:
        assert (remote.chunk_size, remote.action_dim, remote.action_convention) == (H, A, "delta")
        assert remote.metadata["required_keys"] == ["observation/state", "observation/image", "observation/wrist_image"]
        chunk = remote.predict_action_chunk(_to_batch(obs))
        assert chunk.shape == (3, H, A) and chunk.dtype == torch.float32
        for i, o in enumerate(obs):
            np.testing.assert_allclose(chunk[i].numpy(), _expected(policy, o), rtol=1e-5, atol=1e-5)
        assert remote.last_server_timing["infer_ms"] >= 0 and "prev_total_ms" in remote.last_server_timing
        action = remote.select_action(_to_batch(obs[:1]))  # the ChunkPolicy queue on top
        np.testing.assert_allclose(action[0].numpy(), _expected(policy, obs[0])[0], rtol=1e-5, atol=1e-5)


def test_real_openpi_client_talks_to_our_server():
    ws_client = pytest.importorskip("openpi_client.websocket_client_policy", reason=OPENPI_SKIP)
    policy, rng = _policy(), np.random.default_rng(1)
    with BackgroundServer(policy) as server:
        client = ws_client.WebsocketClientPolicy("127.0.0.1", server.port)
        meta = client.get_server_metadata()
        assert (meta["chunk_size"], meta["action_dim"], meta["action_convention"]) == (H, A, "delta")
        for _ in range(3):
            o = _obs(rng)
            reply = client.infer(o)
            assert reply["actions"].shape == (H, A) and reply["actions"].dtype == np.float32
            np.testing.assert_allclose(reply["actions"], _expected(policy, o), rtol=1e-5, atol=1e-5)
            assert set(reply["server_timing"]) <= {"infer_ms", "prev_total_ms"}
        client._ws.close()  # WebsocketClientPolicy has no close()


def test_bad_request_gets_an_error_naming_the_key_and_the_server_goes_on():
    policy, rng = _policy(), np.random.default_rng(2)
    with BackgroundServer(policy) as server, RemotePolicy(port=server.port, timeout=60) as remote:
        batch = _to_batch([_obs(rng)])
        no_state = {k: v for k, v in batch.items() if k != "observation.state"}
        with pytest.raises(ValueError, match="lacks 'observation.state'"):  # caught client side already
            remote.predict_action_chunk(no_state)
        # a request that reaches the server without the state: sent raw over the same connection
        from upright.vla import wire

        o = _obs(rng)
        remote._ws.send(wire.packb({k: v for k, v in o.items() if k != "observation/state"}))
        with pytest.raises(RuntimeError, match="bad request: observation lacks 'observation/state'"):
            wire.actions_from_reply(remote._ws.recv(timeout=60))
        remote._ws.send("not msgpack")
        with pytest.raises(RuntimeError, match="binary msgpack-numpy frames"):
            wire.actions_from_reply(remote._ws.recv(timeout=60))
        # the same connection serves the next request
        np.testing.assert_allclose(
            remote.predict_action_chunk(_to_batch([o]))[0].numpy(), _expected(policy, o), rtol=1e-5, atol=1e-5
        )
        ws_client = pytest.importorskip("openpi_client.websocket_client_policy", reason=OPENPI_SKIP)
        client = ws_client.WebsocketClientPolicy("127.0.0.1", server.port)
        with pytest.raises(RuntimeError, match="observation lacks 'observation/state'"):
            client.infer({"observation/image": o["observation/image"], "prompt": "x"})
        np.testing.assert_allclose(client.infer(o)["actions"], _expected(policy, o), rtol=1e-5, atol=1e-5)
        client._ws.close()


class _Crashing(ChunkPolicy):
    chunk_size, action_dim = 2, 1

    def predict_action_chunk(self, batch):
        raise ZeroDivisionError("policy bug")


def test_policy_error_is_one_line_closes_that_connection_like_openpi_and_keeps_serving(caplog):
    """openpi's server sends the traceback; ours sends one line and logs the traceback (issue 33 §5)."""
    batch = {"observation.state": torch.zeros(1, 3)}
    with BackgroundServer(_Crashing()) as server:
        remote = RemotePolicy(port=server.port, timeout=60)
        with pytest.raises(
            RuntimeError,
            match=r"policy error: ZeroDivisionError: policy bug \(the traceback is in "
            r"the server's log\)$",
        ) as e:
            remote.predict_action_chunk(batch)
        assert "Traceback" not in str(e.value) and "\n" not in str(e.value)
        assert any(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in caplog.records)  # logged in full
        with pytest.raises(ConnectionError, match="connection lost"):
            remote.predict_action_chunk(batch)
        again = RemotePolicy(port=server.port, timeout=60)  # a new connection is accepted
        assert again.chunk_size == 2
        again.close()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200


def test_remote_policy_connection_error_names_address_and_server_command():
    with BackgroundServer(_policy()) as server:
        port = server.port
    with pytest.raises(ConnectionError, match=rf"ws://127.0.0.1:{port}.*upright-policy-server --policy"):
        RemotePolicy(port=port, timeout=10)


def test_remote_policy_settings_must_agree_with_the_server():
    with BackgroundServer(_policy()) as server:
        with pytest.raises(ValueError, match="chunk_size=7 given, but the server"):
            RemotePolicy(port=server.port, chunk_size=7, timeout=60)
        with RemotePolicy(port=server.port, chunk_size=H, action_dim=A, timeout=60) as remote:
            assert remote.chunk_size == H


def test_console_server_process_serves_the_openpi_client():
    """``upright-policy-server`` as its own process (``python -m``), bound to a free port, loaded by MODULE:FACTORY."""
    ws_client = pytest.importorskip("openpi_client.websocket_client_policy", reason=OPENPI_SKIP)
    cmd = [
        sys.executable,
        "-m",
        "upright.vla.server",
        "--policy",
        "upright.vla.linear:make_linear_policy",
        "--arg",
        f"state_dim={S}",
        "--arg",
        f"chunk_size={H}",
        "--arg",
        f"action_dim={A}",
        "--port",
        "0",
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline, port = time.monotonic() + 240, None
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r"on ws://127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else None
        assert port is not None, "the server did not report its port"
        client = ws_client.WebsocketClientPolicy("127.0.0.1", port)
        assert client.get_server_metadata()["policy"] == "LinearChunkPolicy"
        expect = LinearChunkPolicy(S, H, A, seed=0)
        state = np.arange(S, dtype=np.float32)
        reply = client.infer({"observation/state": state, "prompt": "go"})
        want = expect.predict_action_chunk({"observation.state": torch.from_numpy(state)[None], "task": ["go"]})[0]
        np.testing.assert_allclose(reply["actions"], want.numpy(), rtol=1e-5, atol=1e-5)
        client._ws.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cli_rejects_unknown_policy_spec_with_the_fix(capsys):
    from upright.vla.server import main

    with pytest.raises(SystemExit):
        main(["--policy", "no_such_file.bin"])
    assert "give MODULE:FACTORY" in capsys.readouterr().err


class _Recording(ChunkPolicy):
    """:func:`_policy`'s linear map, recording the batch size of each call; refuses (ValueError) the task 'refuse'."""

    def __init__(self):
        self.inner = _policy()
        self.chunk_size, self.action_dim, self.cameras = H, A, self.inner.cameras
        self.calls: list[int] = []

    def predict_action_chunk(self, batch):
        self.calls.append(len(batch["observation.state"]))
        if "refuse" in batch.get("task", []):
            raise ValueError("this policy refuses the task 'refuse'")
        return self.inner.predict_action_chunk(batch)


def test_answer_many_batches_alike_requests_and_gives_each_bad_one_its_own_error():
    from upright.vla import wire
    from upright.vla.server import PolicyServer

    policy, rng = _Recording(), np.random.default_rng(4)
    obs = [_obs(rng, "a"), _obs(rng, "refuse"), _obs(rng, "b"), _obs(rng, "c")]
    small = _obs(rng, "d")
    small["observation/wrist_image"] = small["observation/wrist_image"][:4]  # another shape: a call of its own
    messages = [
        wire.packb(obs[0]),
        wire.packb({"prompt": "no state"}),
        wire.packb(obs[1]),
        "text frame",
        wire.packb(obs[2]),
        wire.packb(small),
        wire.packb(obs[3]),
    ]
    replies = PolicyServer(policy, max_batch=8).answer_many(messages, prev_total_ms=1.5)
    assert [type(r).__name__ for r in replies] == [
        "dict",
        "ValueError",
        "ValueError",
        "ValueError",
        "dict",
        "dict",
        "dict",
    ]
    assert "lacks 'observation/state'" in str(replies[1]) and "refuses" in str(replies[2])
    assert "binary msgpack-numpy" in str(replies[3])
    for i, o in ((0, obs[0]), (4, obs[2]), (5, small), (6, obs[3])):
        np.testing.assert_allclose(replies[i]["actions"], _expected(policy.inner, o), rtol=1e-5, atol=1e-5)
        timing = replies[i]["server_timing"]
        assert timing["infer_ms"] >= 0 and (timing["prev_total_ms"] == 1.5) is (i == 0)  # the others: this call's
    # the 4 alike requests in one call, refused (a bad row inside), then row by row; the other shape alone
    assert policy.calls == [4, 1, 1, 1, 1, 1]
    policy.calls.clear()
    PolicyServer(policy, max_batch=3).answer_many([wire.packb(o) for o in (obs[0], obs[2], obs[3], obs[0])])
    assert policy.calls == [3, 1]  # at most max_batch rows per call
    with pytest.raises(ValueError, match="max_batch must be >= 1"):
        PolicyServer(policy, max_batch=0)


@pytest.mark.parametrize(("max_batch", "max_in_flight", "connections"), [(4, 256, 1), (1, 2, 3), (256, 1, 1)])
def test_pipelined_rows_come_back_in_order(max_batch, max_in_flight, connections):
    """11 rows: pipelined on one connection to a batching server, a window of 2 over 3 connections to a server that
    answers one request at a time (openpi's way), one round trip per row: the same chunks, row i for row i."""
    policy, rng = _Recording(), np.random.default_rng(5)
    obs = [_obs(rng, f"task {i}" * (i % 3)) for i in range(11)]
    with (
        BackgroundServer(policy, max_batch=max_batch) as server,
        RemotePolicy(port=server.port, timeout=60, max_in_flight=max_in_flight, connections=connections) as remote,
    ):
        assert remote.metadata["max_batch"] == max_batch
        for _ in range(2):
            chunk = remote.predict_action_chunk(_to_batch(obs))
            for i, o in enumerate(obs):
                np.testing.assert_allclose(chunk[i].numpy(), _expected(policy.inner, o), rtol=1e-5, atol=1e-5)
    assert sum(policy.calls) == 22 and max(policy.calls) <= max_batch


def test_a_refused_row_in_a_pipelined_batch_raises_and_the_connection_stays_in_step():
    policy, rng = _Recording(), np.random.default_rng(6)
    obs = [_obs(rng, "a"), _obs(rng, "refuse"), _obs(rng, "b")]
    with BackgroundServer(policy) as server, RemotePolicy(port=server.port, timeout=60) as remote:
        with pytest.raises(RuntimeError, match="bad request: this policy refuses"):
            remote.predict_action_chunk(_to_batch(obs))
        good = [obs[0], obs[2], obs[0]]
        chunk = remote.predict_action_chunk(_to_batch(good))  # every reply of the failed batch was read
        for i, o in enumerate(good):
            np.testing.assert_allclose(chunk[i].numpy(), _expected(policy.inner, o), rtol=1e-5, atol=1e-5)


def test_select_action_asks_the_server_only_for_the_envs_that_need_a_chunk():
    policy, rng = _Recording(), np.random.default_rng(7)
    obs = [_obs(rng, str(i)) for i in range(5)]
    with BackgroundServer(policy) as server, RemotePolicy(port=server.port, timeout=60) as remote:
        first = remote.select_action(_to_batch(obs))
        assert sum(policy.calls) == 5
        remote.select_action(_to_batch(obs))
        assert sum(policy.calls) == 5  # the queue had the chunks' second actions
        new = [_obs(rng, "new") for _ in range(5)]
        remote.reset(torch.tensor([1, 3]))
        third = remote.select_action(_to_batch(new))
        assert sum(policy.calls) == 7  # 2 requests: envs 1 and 3
        for i in range(5):
            want = _expected(policy.inner, new[i])[0] if i in (1, 3) else _expected(policy.inner, obs[i])[2]
            np.testing.assert_allclose(third[i].numpy(), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(first[2].numpy(), _expected(policy.inner, obs[2])[0], rtol=1e-5, atol=1e-5)


def test_file_loaders_serve_a_tinyvla_and_its_onnx_with_their_weights_hash(tmp_path):
    from upright.vla.checksums import file_sha256, parameters_sha256
    from upright.vla.export import export_onnx
    from upright.vla.loaders import load_policy
    from upright.vla.onnx_policy import OnnxChunkPolicy
    from upright.vla.server_metadata import policy_metadata
    from upright.vla.tiny import TinyVLA, TinyVLAConfig

    model = TinyVLA(TinyVLAConfig(cameras=(), state_dim=49, state_key="observation.policy_obs", chunk_size=4)).eval()
    model.save(tmp_path / "model.pt")
    export_onnx(model, tmp_path / "vla" / "policy.onnx")
    for spec in (str(tmp_path), str(tmp_path / "model.pt")):
        loaded = load_policy(spec)
        assert isinstance(loaded, TinyVLA)
        meta = policy_metadata(loaded)
        assert meta["weights_sha256"] == parameters_sha256(model) and meta["state_key"] == "observation.policy_obs"
        assert (meta["state_dim"], meta["chunk_size"], meta["cameras"]) == (49, 4, [])
    for spec in (str(tmp_path / "vla"), str(tmp_path / "vla" / "policy.onnx")):
        loaded = load_policy(spec)
        assert isinstance(loaded, OnnxChunkPolicy)
        meta = policy_metadata(loaded)
        assert meta["weights_sha256"] == file_sha256(tmp_path / "vla" / "policy.onnx")
        assert (meta["state_key"], meta["state_dim"]) == ("observation.policy_obs", 49)
    with pytest.raises(ValueError, match="takes no --arg"):
        load_policy(str(tmp_path), {"seed": "1"})


def test_parse_ws_url():
    from upright.policy_io.residual_base import parse_ws_url

    assert parse_ws_url("ws://127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_ws_url("ws://gpu-box:8001/") == ("gpu-box", 8001)
    assert parse_ws_url("ws://[::1]:8000") == ("::1", 8000)
    for bad in ("ws://gpu-box", "http://a:1", "wss://a:1", "ws://a:1/path", "ws://:80"):
        with pytest.raises(ValueError, match="expected ws://HOST:PORT"):
            parse_ws_url(bad)
