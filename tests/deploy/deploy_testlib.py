"""Helpers of the deploy tests: a small ONNX policy with real metadata, a fake robot on ptys, a harness."""

from __future__ import annotations

import pathlib
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from upright.deploy.bus import MotorBus
from upright.deploy.controller import Controller, ControllerConfig
from upright.deploy.protocol import go_m8010 as go
from upright.deploy.protocol import imu_frame
from upright.deploy.pty_device import Fault, PtyDeviceServer
from upright.deploy.robot import JointCommand, SerialRobot
from upright.deploy.robot_config import BusConfig, MotorConfig, RobotConfig
from upright.policy_io.spec import PolicySpec
from upright.tasks.standup.observations import OBSERVATION_TERMS, observation_dims


def wait_until(condition, what: str, timeout: float, every: float):
    """Call ``condition`` every ``every`` s until it returns something truthy (returned); fail the test naming
    ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def write_linear_policy(
    path: pathlib.Path, obs_dim: int, num_actions: int, metadata: dict | None, seed: int = 0, gain: float = 0.05
) -> pathlib.Path:
    """An ONNX graph ``actions = tanh(obs @ W + b)`` (random W, fixed seed) with ``metadata`` attached."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((obs_dim, num_actions)) * gain).astype(np.float32)
    b = (rng.standard_normal(num_actions) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["obs", "W", "b"], ["pre"]), helper.make_node("Tanh", ["pre"], ["actions"])],
        "linear_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, num_actions])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    if metadata is not None:
        from upright.training.onnx_export import attach_metadata

        attach_metadata(path, metadata)
    return path


# ------------------------------------------------------------------ a small robot for fault injection
JOINTS = ("j0", "j1", "j2")
HELD = ("h0",)


def small_robot() -> RobotConfig:
    motors = tuple(
        MotorConfig(joint=name, motor_id=i, lower=-1.0, upper=1.0, torque_limit=20.0, velocity_limit=20.0)
        for i, name in enumerate(JOINTS + HELD)
    )
    return RobotConfig(
        name="small", buses=(BusConfig(name="bus0", port="", motors=motors, has_imu=True),), reply_timeout_s=0.002
    )


def small_spec(history: int = 2, action_mode: str = "relative") -> PolicySpec:
    j = len(JOINTS)
    names = tuple(t.name for t in OBSERVATION_TERMS)
    return PolicySpec(
        path="<test>", task="test", joint_names=JOINTS, kp=np.full(j, 20.0), kd=np.full(j, 1.0),
        default_joint_pos=np.array([0.1, -0.1, 0.2]), held_joint_names=HELD, held_kp=np.array([20.0]),
        held_kd=np.array([1.0]), held_joint_pos=np.array([0.0]), action_mode=action_mode, action_scale=0.5,
        action_clip=100.0,
        control_dt=0.02, observation_names=names, observation_dims=tuple(observation_dims(j)),
        observation_scales=tuple(t.scale for t in OBSERVATION_TERMS), history_length=history,
        observation_clip=100.0, input_name="obs", output_name="actions", metadata={},
    )  # fmt: skip


class KinematicModel:
    """Motors that move toward their PD target (first order), an upright IMU; thread-safe enough for tests."""

    def __init__(self, robot: RobotConfig, temperature: int = 35):
        self.robot = robot
        n = len(robot.joint_names)
        self.q = np.zeros(n)
        self.dq = np.zeros(n)
        self.gear = robot.array("gear")
        self.temperature = temperature
        self.seq = 0
        self.index = {(0, m.motor_id): k for k, m in enumerate(robot.motors)}

    def motor_reply(self, bus: int, cmd: go.GoCommand) -> go.GoReply | None:
        k = self.index.get((bus, cmd.motor_id))
        if k is None:
            return None
        g = self.gear[k]
        if cmd.mode == go.MotorMode.FOC and cmd.kp > 0:
            target = cmd.q / g
            new = self.q[k] + 0.05 * (target - self.q[k])
            self.dq[k] = (new - self.q[k]) / 0.002
            self.q[k] = new
        else:
            self.dq[k] = 0.0
        return go.GoReply(cmd.motor_id, cmd.mode, 0.0, self.dq[k] * g, self.q[k] * g, self.temperature, 0, 0)

    def imu_sample(self, tick: int) -> imu_frame.ImuSample:
        self.seq += 1
        return imu_frame.ImuSample(
            imu_frame.DEFAULT_ADDRESS, self.seq, tick * 2000, (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 9.81)
        )

    def idle(self):
        return None


DEVICE_STUCK_S = 30.0
"""How long (s) a :class:`DeviceTimedBus` waits for the fake device to read a request before it fails the test: its
thread is then stuck or stopped, which is not a fault of the daemon's link."""


class FakeDeviceServer(PtyDeviceServer):
    """The harness's fake device (a thread of the test process): :class:`PtyDeviceServer` plus a condition that
    :class:`DeviceTimedBus` waits on, and the monotonic time (ns) at which it last answered each bus."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.progress = threading.Condition()
        self.answered_ns = [0] * len(self.links)
        self._answered = [0] * len(self.links)

    def on_progress(self, bus: int) -> None:
        with self.progress:
            if self.consumed[bus] != self._answered[bus]:
                self._answered[bus] = self.consumed[bus]
                self.answered_ns[bus] = time.monotonic_ns()
            self.progress.notify_all()


class DeviceTimedBus(MotorBus):
    """The daemon's :class:`MotorBus` with its reply deadline in the fake device's time.

    Real motors answer in microseconds whatever the host's load; the fake device is a thread that a loaded machine
    (the issue's case: 2 cores, 4+ busy processes) leaves without a CPU for tens of ms, so the daemon saw its replies
    miss the 2 ms ``reply_timeout_s`` and reported a motor link fault the test did not inject (issue 33.8: a stale IMU
    reported as "motor link fault"). The real :meth:`MotorBus.receive` runs first, with the daemon's deadline; when it
    times out, this bus waits until the device has read and answered every byte sent so far (at most
    :data:`DEVICE_STUCK_S`) and has written every delayed reply due by the deadline shifted by the time the device
    waited for a CPU, then reads once more without waiting: an answer the device gave in time is read, an injected drop
    or a delay longer than the timeout still times out."""

    def __init__(self, port: str, baudrate: int, name: str, device: FakeDeviceServer, index: int):
        super().__init__(port, baudrate, name)
        self.device, self.index = device, index
        self.sent = 0
        """Bytes sent so far."""
        self.sent_ns = 0
        """Monotonic time (ns) of the last send."""

    def send(self, frame: bytes) -> None:
        super().send(frame)
        self.sent += len(frame)
        self.sent_ns = time.monotonic_ns()

    def receive(self, size: int, header: bytes, deadline_ns: int) -> bytes | None:
        frame = super().receive(size, header, deadline_ns)
        if frame is not None:
            return frame
        dev, b = self.device, self.index
        with dev.progress:
            if not dev.progress.wait_for(lambda: dev.consumed[b] >= self.sent, DEVICE_STUCK_S):
                raise RuntimeError(
                    f"the fake device read {dev.consumed[b]} of the {self.sent} bytes sent to "
                    f"{self.name} in {DEVICE_STUCK_S:g} s: its thread is stuck or stopped"
                )
            due_by = (deadline_ns + max(0, dev.answered_ns[b] - self.sent_ns)) / 1e9  # s, monotonic
            if not dev.progress.wait_for(lambda: not [d for d in dev.pending_due(b) if d <= due_by], DEVICE_STUCK_S):
                raise RuntimeError(
                    f"the fake device did not write its delayed replies to {self.name} in {DEVICE_STUCK_S:g} s"
                )
        return super().receive(size, header, 0)  # the deadline is past: only what is in the pty already


class RecordingRobot(SerialRobot):
    """A SerialRobot that keeps a copy of every joint-side command it sends; with ``device``, its buses are
    :class:`DeviceTimedBus` on that fake device.

    ``tick_period_s``: the readings' time (``t_ns``, what the daemon's age checks read) is the first exchange's time
    plus ``tick`` times this period (s), not the wall clock: for cycles run back to back (``run_loop(pace=False)``),
    whose wall time per cycle depends on the machine's load, ages then count cycles (50 ms = 25 cycles at 500 Hz)."""

    def __init__(self, config: RobotConfig, device: FakeDeviceServer | None = None, tick_period_s: float | None = None):
        super().__init__(config)
        self.sent: list[tuple[int, dict[str, np.ndarray]]] = []
        if device is not None:
            index = {link.name: i for i, link in enumerate(device.links)}
            self.buses = [DeviceTimedBus(b.port, b.baudrate, b.name, device, index[b.name]) for b in config.buses]
        self.tick_period_ns = None if tick_period_s is None else round(tick_period_s * 1e9)
        self._t0_ns: int | None = None

    def exchange(self, command: JointCommand, tick: int):
        self.sent.append((tick, {k: getattr(command, k).copy() for k in ("mode", "q", "dq", "kp", "kd", "tau")}))
        reading = super().exchange(command, tick)
        if self.tick_period_ns is not None:
            if self._t0_ns is None:
                self._t0_ns = reading.t_ns - tick * self.tick_period_ns
            reading.t_ns = self._t0_ns + tick * self.tick_period_ns
        return reading


class Harness:
    """A controller driving the small robot, whose fake device runs on ptys in a thread; optionally with the real
    logger process writing ``dataset`` and the real operator socket at ``socket``.

    The device answers in device time (:class:`DeviceTimedBus`): a reply is late only when a fault makes it so, not
    because the machine is loaded. The daemon's checks read the wall clock, or with ``tick_clock`` one I/O period
    per cycle (:class:`RecordingRobot`; for ``run_loop(pace=False)``: the checks of age then count cycles)."""

    def __init__(
        self,
        policy,
        faults=(),
        cfg: ControllerConfig | None = None,
        temperature: int = 35,
        dataset: pathlib.Path | None = None,
        socket: pathlib.Path | None = None,
        tick_clock: bool = False,
    ):
        self.robot_cfg = small_robot()
        self.model = KinematicModel(self.robot_cfg, temperature)
        self.server = FakeDeviceServer(
            ["bus0"], [{m.motor_id: m.joint for m in self.robot_cfg.motors}], self.model, faults=list(faults)
        )
        self.server.record_commands = True
        self.robot_cfg = self.robot_cfg.with_ports(self.server.ports)
        self._stop = False
        self.thread = threading.Thread(target=self.server.serve, args=(lambda: self._stop,), daemon=True)
        self.thread.start()
        self.spec = small_spec()
        self.cfg = cfg or ControllerConfig(
            ramp_s=0.1,
            policy_ramp_s=0.0,
            auto_start=True,
            auto_engage_s=0.04,
            stop_damping_s=0.02,
            exit_after_damping_s=0.1,
        )
        self.robot = RecordingRobot(
            self.robot_cfg, device=self.server, tick_period_s=1.0 / self.cfg.io_rate_hz if tick_clock else None
        )
        self.robot.connect()
        self.logger = self.operator = None
        if dataset is not None:
            from upright.dataset_io.records import frame_features
            from upright.deploy.logger_client import LoggerClient

            names = [
                f"{n}.{i}" for n, d in zip(self.spec.observation_names, self.spec.observation_dims) for i in range(d)
            ]
            self.logger = LoggerClient(dataset, frame_features(self.spec.joint_names, names), fps=50,
                                       robot_type="small", task="test", flush_every=1)  # fmt: skip
        if socket is not None:
            from upright.deploy.operator import OperatorServer

            self.operator = OperatorServer(str(socket))
        self.controller = Controller(
            self.spec, self.robot_cfg, policy, self.cfg, logger=self.logger, operator=self.operator
        )

    def close(self):
        if self.logger is not None or self.operator is not None:
            self.controller.close()  # ends the episode, waits for the logger, removes the socket
        self._stop = True
        self.thread.join(2)
        self.robot.close()
        self.server.close()

    def damping_index(self) -> int | None:
        """Index (in ``robot.sent``) of the first damping command (kp = 0 everywhere, kd > 0)."""
        for i, (_, c) in enumerate(self.robot.sent):
            if (c["kp"] == 0).all() and (c["kd"] > 0).all():
                return i
        return None

    def damping_tick(self) -> int | None:
        """I/O tick of the first damping command."""
        i = self.damping_index()
        return None if i is None else self.robot.sent[i][0]

    def assert_no_unsafe_command(self, max_delta: float | None = 0.5) -> None:
        """Every command finite; position targets inside the limits with bounded per-tick jumps; once damping
        started, damping only; and the last thing every motor received on the wire was damping."""
        lower, upper = self.robot_cfg.array("lower"), self.robot_cfg.array("upper")
        i_damp = self.damping_index()
        prev_q = None
        for i, (tick, c) in enumerate(self.robot.sent):
            for k, v in c.items():
                assert np.isfinite(v).all(), f"non-finite {k} sent at tick {tick}"
            if i_damp is not None and i >= i_damp:
                assert (c["kp"] == 0).all() and (c["kd"] > 0).all() and (c["tau"] == 0).all(), (
                    f"tick {tick}: not damping"
                )
                continue
            if (c["kp"] > 0).any():
                assert ((c["q"] >= lower - 1e-9) & (c["q"] <= upper + 1e-9)).all(), f"tick {tick}: target out of limits"
                if prev_q is not None and max_delta is not None:
                    assert np.abs(c["q"] - prev_q).max() <= max_delta + 1e-9, f"tick {tick}: target jump"
                prev_q = c["q"].copy()
        # bytes on the wire: the last command of each motor is damping (kp = 0, kd > 0)
        last = {}
        for _, _bus, cmd in self.server.commands:
            last[cmd.motor_id] = cmd
        assert set(last) == {m.motor_id for m in self.robot_cfg.motors}
        for cmd in last.values():
            assert cmd.kp == 0 and cmd.kd > 0 and cmd.tau == 0 and cmd.mode == go.MotorMode.FOC


class ConstantPolicy:
    """Returns a constant action; NaN from tick ``nan_after`` on; raises or sleeps when asked to."""

    def __init__(
        self,
        value: float = 0.05,
        nan_after: int | None = None,
        sleep_s: float = 0.0,
        sleep_after: int = 0,
        raise_after: int | None = None,
        n: int = 3,
    ):
        self.value, self.nan_after, self.sleep_s, self.sleep_after = value, nan_after, sleep_s, sleep_after
        self.raise_after, self.n, self.calls = raise_after, n, 0

    def __call__(self, obs):
        self.calls += 1
        if self.raise_after is not None and self.calls > self.raise_after:
            raise RuntimeError("policy crashed")
        if self.sleep_s and self.calls > self.sleep_after:
            time.sleep(self.sleep_s)
        if self.nan_after is not None and self.calls > self.nan_after:
            return np.full(self.n, np.nan, np.float32)
        return np.full(self.n, self.value, np.float32)


def goal_seeking_tiny_vla(goal, contract: dict, gain: float = 2.0, chunk_size: int = 10, embed: bool = True,
                          cameras: tuple[str, ...] = (), image_size: tuple[int, int] = (64, 64),
                          image_gain: float = 5.0, seed: int = 0):  # fmt: skip
    """A TinyVLA (``observation.state`` = q, dq, gyro, gravity of the contract's J joints) whose weights are set by
    hand so that every action of its chunk is clip(gain·(goal - q), ±1): under the ``delta`` rule its targets
    integrate the error, so the arm settles at ``goal`` (J,) whatever gravity does. A real TinyVLA (instruction
    encoder, normalisation, MLP head), exportable with :func:`upright.vla.export.export_onnx`; ``embed``: store the
    deploy contract in the model (False: a model without one).

    ``cameras``: it also reads ``observation.images.<camera>`` (``image_size`` (H, W)) through its CNN with random
    weights (``seed``), and every action gets ``image_gain`` · (a fixed random projection of the image features, minus
    that of a gray image): the chunk depends on the exact frame (by ~1e-3 between two scenes) while the arm still
    settles within a few mrad of ``goal``."""
    import torch

    from upright.deploy.chunk_policy import state_names
    from upright.vla.tiny import TinyVLA, TinyVLAConfig

    joints = list(contract["joint_names"])
    j = len(joints)
    cams = tuple(cameras)
    hidden = 2 * j + (2 if cams else 0)
    cfg = TinyVLAConfig(cameras=cams, image_height=image_size[0], image_width=image_size[1], state_dim=2 * j + 6,
                        action_dim=j, chunk_size=chunk_size, hidden_dim=hidden, text_dim=8, vocab_size=64,
                        image_dim=16, conv_channels=8, state_names=tuple(state_names(joints)),
                        action_names=tuple(joints),
                        extra={"deploy_contract": dict(contract)} if embed else {})  # fmt: skip
    model = TinyVLA(cfg)
    lin1, lin2, lin3 = model.head[0], model.head[2], model.head[4]
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        # the head's input: the cameras' features, the instruction's features, then the (normalised) state
        off = len(cams) * cfg.image_dim + cfg.text_dim
        for i, g in enumerate(goal):
            lin1.weight[2 * i, off + i], lin1.bias[2 * i] = 1.0, -float(g)  # relu(q - goal)
            lin1.weight[2 * i + 1, off + i], lin1.bias[2 * i + 1] = -1.0, float(g)  # relu(goal - q)
        if cams:
            gen = torch.Generator().manual_seed(seed)
            torch.manual_seed(seed)
            for m in model.image_encoder.modules():
                if m is not model.image_encoder and hasattr(m, "reset_parameters"):
                    m.reset_parameters()
            w = torch.randn(len(cams) * cfg.image_dim, generator=gen) / (len(cams) * cfg.image_dim) ** 0.5
            gray = torch.full((1, 3, *image_size), 0.5)
            c = float(w @ torch.cat([model.image_encoder(gray)] * len(cams), dim=-1)[0])  # w·f of a gray image
            lin1.weight[2 * j, : w.numel()], lin1.weight[2 * j + 1, : w.numel()] = w, -w  # relu(±(w·f - c))
            lin1.bias[2 * j], lin1.bias[2 * j + 1] = -c, c
        lin2.weight.copy_(torch.eye(hidden))
        for h in range(chunk_size):
            for i in range(j):
                lin3.weight[h * j + i, 2 * i], lin3.weight[h * j + i, 2 * i + 1] = -gain, gain
                if cams:  # + image_gain · w·f
                    lin3.weight[h * j + i, 2 * j], lin3.weight[h * j + i, 2 * j + 1] = image_gain, -image_gain
    return model.eval()


__all__ = [
    "Fault",
    "Harness",
    "ConstantPolicy",
    "write_linear_policy",
    "small_robot",
    "small_spec",
    "goal_seeking_tiny_vla",
]
