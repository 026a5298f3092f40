"""The chunked-policy runner (upright/deploy/chunk_runner.py) with a real ChunkPolicy whose inference sleeps to emulate
latency: one queued action per tick, prefetch without a gap while latency < the prefetch margin, latency
compensation, stale chunks discarded, and, inside the controller, hold + STALE_ACTION then DAMPING, a worker
exception -> DAMPING, and a clean shutdown.

TickPolicy's chunk predicted from the observation of tick t holds t + k at position k, and the tests feed each tick
its own number as the observation: so an action executed at tick T must equal T exactly whatever the latency (a chunk
used without dropping its past actions would give T - elapsed)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from deploy_testlib import small_robot, small_spec

from upright.dataset_io.records import SafetyFlag
from upright.deploy.chunk_runner import ChunkRunner
from upright.deploy.controller import Controller, ControllerConfig
from upright.deploy.policy import PolicyFault
from upright.deploy.robot import RobotReading
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode
from upright.vla.policy import ChunkPolicy


class TickPolicy(ChunkPolicy):
    """A deterministic ChunkPolicy: from state s, every action dim of chunk position k is (s[0] + k)·``scale``; each
    call sleeps ``latency_s`` (from call ``slow_from`` on), and calls from ``fail_at`` on raise."""

    action_convention = "delta"

    def __init__(
        self,
        chunk_size: int = 8,
        action_dim: int = 3,
        latency_s: float = 0.0,
        slow_from: int = 1,
        fail_at: int | None = None,
        scale: float = 1.0,
    ):
        self.chunk_size, self.action_dim, self.scale = chunk_size, action_dim, scale
        self.latency_s, self.slow_from, self.fail_at = latency_s, slow_from, fail_at
        self.calls = 0
        self.tasks: list = []
        self.threads: set[str] = set()

    def predict_action_chunk(self, batch):
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        self.tasks.append(batch.get("task"))
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise RuntimeError("model exploded\nsecond line of the traceback")
        if self.calls >= self.slow_from:
            time.sleep(self.latency_s)
        s = batch["observation.state"][:, :1].float()
        chunk = (s + torch.arange(self.chunk_size, dtype=torch.float32)) * self.scale
        return chunk.unsqueeze(-1).expand(-1, self.chunk_size, self.action_dim).contiguous()


def drive(runner: ChunkRunner, ticks: int, dt: float) -> list:
    """Call the runner at ticks 1..``ticks`` paced at ``dt`` (absolute deadlines), observation = the tick number;
    returns what each call returned (None, or the action's first entry)."""
    out = []
    t0 = time.monotonic()
    for t in range(1, ticks + 1):
        delay = t0 + t * dt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        a = runner(np.array([[float(t)]], np.float32))
        if a is not None:
            assert a.shape == (runner.action_dim,) and a.dtype == np.float32
            assert (a == a[0]).all()
        out.append(None if a is None else float(a[0]))
    return out


def served(out: list) -> list[tuple[int, float]]:
    return [(t, v) for t, v in enumerate(out, start=1) if v is not None]


def on_time(got: list[tuple[int, float]]) -> bool:
    """Every executed action is the one predicted for its own tick (ensembling averages equal values: 1e-4)."""
    return all(abs(v - t) < 1e-4 for t, v in got)


@pytest.fixture
def runners():
    made = []

    def make(policy, **kw):
        kw.setdefault("control_dt", 0.02)
        r = ChunkRunner(policy, "lift the cube", **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_one_queued_action_per_tick_and_inference_off_the_calling_thread(runners):
    policy = TickPolicy(chunk_size=5)
    r = runners(policy, prefetch_below=1)
    out = drive(r, 40, 0.02)
    got = served(out)
    assert on_time(got), got  # each tick executes its own action of the chunk, in order
    assert out[0] is None and len(got) >= 36  # the first chunk is on its way at tick 1
    # chunks are consumed from the queue (H - 1 ticks each after the one tick of latency), not predicted every tick
    assert 40 / 5 <= r.stats.chunks_used <= 40 / 4 + 2, r.stats
    assert policy.threads == {"upright-chunk-policy"}  # never on the control thread
    assert all(task == ["lift the cube"] for task in policy.tasks)


@pytest.mark.parametrize("prefetch", [None, 1])
def test_prefetch_leaves_no_gap_while_latency_is_below_the_margin(runners, prefetch):
    """Latency 0.04 s = 2 ticks; default k = H // 2 = 6 ticks of margin: after the first chunk no tick lacks an
    action. k = 1 asks only when the queue is empty: every chunk then leaves a gap of the latency."""
    r = runners(TickPolicy(chunk_size=12, latency_s=0.04), prefetch_below=prefetch)
    out = drive(r, 60, 0.02)
    first = next(t for t, v in enumerate(out) if v is not None)
    gaps = sum(v is None for v in out[first:])
    assert on_time(served(out))
    if prefetch is None:
        assert r.prefetch_below == 6 and gaps == 0, out
    else:
        assert gaps >= 3, out


@pytest.mark.parametrize("ensemble", [None, 0.01])
def test_latency_compensation_drops_the_actions_of_elapsed_ticks(runners, ensemble):
    """Latency 0.05 s at dt 0.01 s: each chunk arrives about 5 ticks after its observation; the actions of those
    ticks are dropped, so the executed action is still the one for this tick (queue mode and ACT ensembling)."""
    r = runners(
        TickPolicy(chunk_size=16, latency_s=0.05), control_dt=0.01, prefetch_below=16, temporal_ensemble_coeff=ensemble
    )
    out = drive(r, 60, 0.01)
    got = served(out)
    assert len(got) >= 40 and on_time(got), got
    assert r.stats.chunks_used >= 3 and r.stats.dropped_actions >= 2 * r.stats.chunks_used, r.stats


def test_stale_chunks_are_not_executed(runners):
    # every chunk arrives older than max_chunk_age_s: discarded, the tick gets nothing
    r = runners(TickPolicy(latency_s=0.08), max_chunk_age_s=0.05)
    out = drive(r, 15, 0.02)
    assert out == [None] * 15 and r.stats.chunks_stale >= 1 and r.stats.chunks_used == 0
    assert "queue empty" in r.miss_reason
    # a queued chunk that ages out is dropped even with actions left: the second inference stalls for 1 s
    r2 = runners(TickPolicy(chunk_size=50, latency_s=1.0, slow_from=2), max_chunk_age_s=0.2, prefetch_below=1)
    out = drive(r2, 30, 0.02)
    got = served(out)
    last = got[-1][0]
    assert on_time(got) and 4 <= len(got) <= 12, out  # ~0.2 s of a 50-action chunk
    assert out[last:] == [None] * (30 - last) and r2.stats.queue_aged_out == 1


def test_a_worker_exception_raises_a_one_line_policy_fault(runners):
    r = runners(TickPolicy(fail_at=2), prefetch_below=8)
    assert drive(r, 2, 0.02) == [None, 2.0]  # the second request (at tick 2) fails
    deadline = time.monotonic() + 5
    while r.failure is None and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(PolicyFault, match="RuntimeError: model exploded$") as err:
        r(np.zeros((1, 1), np.float32))
    assert "\n" not in str(err.value) and not r.alive


def test_close_joins_the_worker_even_mid_inference(runners):
    policy = TickPolicy(latency_s=0.3)
    r = runners(policy)
    r(np.zeros((1, 1), np.float32))  # an inference starts
    time.sleep(0.05)
    t0 = time.monotonic()
    r.close()
    assert not r.alive and time.monotonic() - t0 < 2.0
    r.close()  # idempotent
    with pytest.raises(PolicyFault, match="closed"):
        r(np.zeros((1, 1), np.float32))
    assert ChunkRunner(TickPolicy(), control_dt=0.02, switch_interval_s=None).close() is None
    with pytest.raises(ValueError, match="prefetch_below"):
        ChunkRunner(TickPolicy(chunk_size=4), control_dt=0.02, prefetch_below=5)


# ------------------------------------------------------------------ inside the controller
def _controller(policy, stale: int = 5) -> tuple[Controller, RobotReading]:
    safety = SafetyConfig(max_consecutive_stale=stale)
    c = Controller(
        small_spec(action_mode="delta"),
        small_robot(),
        policy,
        ControllerConfig(policy_ramp_s=0.0, auto_engage_s=0.0, safety=safety),
    )
    now = time.monotonic_ns()
    c.start(now)
    c.sm.mode = Mode.HOLD  # holding the default pose, as after RAMP_TO_DEFAULT
    c.command.kp[:], c.command.kd[:], c.command.q[:] = c.kp, c.kd, c.default
    c.target[:] = c.default
    rd = RobotReading(4)
    rd.ok[:] = True
    rd.imu_ok, rd.imu_seq, rd.t_ns = True, 1, now
    rd.q[:] = c.default
    return c, rd


def _tick(c, rd, k, dt=0.02):
    time.sleep(dt)
    rd.imu_seq += 1
    rd.t_ns = time.monotonic_ns()
    c.on_cycle(rd, k * c.decimation, 0)


def test_controller_holds_and_flags_stale_ticks_then_damps(runners):
    r = runners(TickPolicy(latency_s=0.08), max_chunk_age_s=0.03)  # every chunk stale
    c, rd = _controller(r, stale=5)
    held = c.default[c.pol].copy()
    for k in range(4):
        _tick(c, rd, k)
        assert c.mode == Mode.POLICY and c.flags & SafetyFlag.STALE_ACTION
        assert not c.flags & SafetyFlag.STALE_FAULT
        np.testing.assert_array_equal(c.command.q[c.pol], held)  # no move
        np.testing.assert_array_equal(c.proposal, 0.0)
        np.testing.assert_array_equal(c.executed, 0.0)  # delta: the executed action of a held target is 0
    _tick(c, rd, 4)
    assert c.mode == Mode.DAMPING and c.flags & SafetyFlag.STALE_FAULT
    reason = c.sm.damping_reason
    assert "no fresh action for 5 policy ticks" in reason and "\n" not in reason
    assert (c.command.kp == 0).all() and (c.command.kd > 0).all()


def test_controller_runs_fresh_chunk_actions_with_the_delta_rule(runners):
    r = runners(TickPolicy(chunk_size=6, scale=0.01), prefetch_below=6)
    c, rd = _controller(r, stale=5)
    beta = c.spec.action_scale
    moved = 0
    for k in range(12):
        before = c.target[c.pol].copy()
        _tick(c, rd, k)
        assert c.mode == Mode.POLICY, c.sm.damping_reason
        if c.flags & SafetyFlag.STALE_ACTION:
            np.testing.assert_array_equal(c.command.q[c.pol], before)
            continue
        a = np.clip(c.proposal, -c.spec.action_clip, c.spec.action_clip)
        expect = np.clip(before + beta * a, c.lower[c.pol], c.upper[c.pol])
        np.testing.assert_allclose(c.command.q[c.pol], expect, atol=1e-12)
        moved += 1
    assert moved >= 8


def test_controller_faults_on_a_worker_exception(runners):
    r = runners(TickPolicy(fail_at=1))
    c, rd = _controller(r, stale=None)
    for k in range(20):
        _tick(c, rd, k)
        if c.mode == Mode.DAMPING:
            break
    assert c.mode == Mode.DAMPING and c.flags & SafetyFlag.EXCEPTION
    assert c.sm.damping_reason == "chunked policy worker failed: RuntimeError: model exploded"
    c.close()  # closes the runner: the worker thread is joined
    assert not r.alive
