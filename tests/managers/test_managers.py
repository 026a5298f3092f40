"""The shared managers (upright.managers): observation frames and history, reward groups, episode sums,
model-field randomisation, action delay, curriculum levels and rules. Values computed by hand."""

from __future__ import annotations

import mujoco
import pytest
import torch

from upright.managers.curriculum import (
    CurriculumRule,
    LevelCurriculum,
    lerp,
    load_per_env,
    lower_on_failure,
    raise_on_success,
)
from upright.managers.episode import EpisodeStats
from upright.managers.observation import (
    FrameObservations,
    ObservationHistory,
    ObservationTerm,
    compute_frame,
    term_dims,
)
from upright.managers.randomization import ActionDelay, FieldTarget, ModelFieldRandomizer, ModelFieldTerm
from upright.managers.reward import RewardGroup, RewardManager, RewardTerm
from upright.sim.native import NativeSim


class S:  # a minimal state
    def __init__(self, x):
        self.x = x


# --- observation -------------------------------------------------------------------------------------------


def test_frame_scales_concatenates_clips_and_noises():
    state = S(torch.tensor([[1.0, -2.0], [300.0, 0.5]]))
    terms = [
        ObservationTerm("a", lambda s: s.x, scale=2.0),
        ObservationTerm("b", lambda s, k: s.x[:, :1] * k, params={"k": 3.0}),
    ]
    frame = compute_frame(terms, state, clip=100.0)
    torch.testing.assert_close(frame, torch.tensor([[2.0, -4.0, 3.0], [100.0, 1.0, 100.0]]))
    assert term_dims(terms, state) == [2, 1]
    noisy_terms = [ObservationTerm("a", lambda s: s.x, noise=0.1)]
    g = torch.Generator().manual_seed(0)
    noisy = compute_frame(noisy_terms, S(torch.zeros(1000, 2)), noise_scale=2.0, generator=g)
    assert 0.15 < noisy.abs().max() <= 0.2 and abs(float(noisy.mean())) < 0.02  # U(-0.2, 0.2)
    assert compute_frame(noisy_terms, S(torch.zeros(3, 2)), noise_scale=0.0).abs().max() == 0


def test_frame_refuses_a_term_that_is_not_2d():
    with pytest.raises(ValueError, match="'bad' must return"):
        compute_frame([ObservationTerm("bad", lambda s: s.x[:, 0])], S(torch.zeros(2, 2)))


def test_history_is_oldest_first_and_resets_per_env():
    h = ObservationHistory(2, 1, length=3)
    for v in (1.0, 2.0, 3.0, 4.0):
        h.push(torch.full((2, 1), v))
    torch.testing.assert_close(h.flat(), torch.tensor([[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]]))
    h.reset(torch.tensor([1]))
    torch.testing.assert_close(h.flat()[1], torch.zeros(3))
    h.reset(torch.tensor([0]), frame=torch.tensor([[7.0]]))
    torch.testing.assert_close(h.flat()[0], torch.full((3,), 7.0))
    with pytest.raises(ValueError):
        ObservationHistory(1, 1, length=0)


def test_frame_groups_keep_their_own_history_and_restart_with_the_first_frame():
    class Env:
        t = 0.0

    env = Env()
    obs = FrameObservations(
        {"actor": lambda e: torch.full((2, 1), e.t), "critic": lambda e: torch.full((2, 2), -e.t)},
        history={"actor": 3},
        num_envs=2,
    )
    obs.update(env)  # the first frame fills the history
    torch.testing.assert_close(obs.get()["actor"], torch.zeros(2, 3))
    for t in (1.0, 2.0):
        env.t = t
        obs.update(env)
    torch.testing.assert_close(obs.get()["actor"], torch.tensor([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]))
    assert obs.get()["critic"].shape == (2, 2)  # one frame, no history
    obs.restart(torch.tensor([1]))
    env.t = 3.0
    obs.update(env)
    torch.testing.assert_close(obs.get()["actor"], torch.tensor([[1.0, 2.0, 3.0], [3.0, 3.0, 3.0]]))
    with pytest.raises(ValueError, match="unknown groups"):
        FrameObservations({"actor": lambda e: None}, history={"policy": 2}, num_envs=1)
    with pytest.raises(ValueError, match="must be >= 1 frame"):
        FrameObservations({"actor": lambda e: None}, history={"actor": 0}, num_envs=1)


# --- reward -----------------------------------------------------------------------------------------------


def test_reward_groups_sum_with_dt_and_product():
    state = S(torch.tensor([0.5, 1.0]))
    terms = [
        RewardTerm("a", lambda s: s.x, "g1", 2.0),
        RewardTerm("b", lambda s: torch.ones(2), "g1", -1.0),
        RewardTerm("c", lambda s: s.x, "g2", 1.0),
        RewardTerm("d", lambda s, k: s.x * k, "g2", 1.0, {"k": 2.0}),
        RewardTerm("e", lambda s: s.x, "g3", 3.0),
    ]
    groups = [
        RewardGroup("g1"),
        RewardGroup("g2", combine="product"),
        RewardGroup("g3", scale_by_dt=False),
        RewardGroup("empty", combine="product"),
    ]
    rewards, parts = RewardManager(terms, groups, dt=0.1).compute(state, 2, "cpu")
    # g1 = 0.1 * (2x - 1); g2 = x * 2x (never x dt); g3 = 3x; a product group without terms is 0, not 1
    torch.testing.assert_close(rewards, torch.tensor([[0.0, 0.5, 1.5, 0.0], [0.1, 2.0, 3.0, 0.0]]))
    torch.testing.assert_close(parts["g1/a"], torch.tensor([0.1, 0.2]))
    assert list(parts) == ["g1/a", "g1/b", "g2/c", "g2/d", "g3/e"]


def test_reward_manager_refuses_bad_groups():
    with pytest.raises(ValueError, match="not one of"):
        RewardManager([RewardTerm("a", lambda s: s.x, "nope", 1.0)], [RewardGroup("g")], dt=0.02)
    with pytest.raises(ValueError, match="Duplicate"):
        RewardManager([RewardTerm("a", lambda s: s.x, "g", 1.0)] * 2, [RewardGroup("g")], dt=0.02)
    with pytest.raises(ValueError, match="combine"):
        RewardGroup("g", combine="max")


# --- episode ----------------------------------------------------------------------------------------------


def test_episode_means_of_finished_episodes():
    ep = EpisodeStats(3)
    for step in range(4):
        ep.length += 1
        ep.add({"r": torch.tensor([1.0, 2.0, float(step)])})
    done = torch.tensor([True, False, True])
    means = ep.finished_means(done)
    torch.testing.assert_close(means["Episode_Reward/r"], torch.tensor([1.0, 1.5]))  # (0+1+2+3)/4 = 1.5
    ep.reset(torch.tensor([0, 2]))
    assert ep.length.tolist() == [0, 4, 0] and ep.sums["r"].tolist() == [0.0, 8.0, 0.0]
    assert ep.finished_means(torch.zeros(3, dtype=torch.bool)) == {}


# --- curriculum rules ---------------------------------------------------------------------------------------


def test_rule_raise_on_success():
    level = torch.tensor([0.0, 0.5, 0.99])
    out = raise_on_success(level, torch.tensor([True, False, True]), step=0.05)
    torch.testing.assert_close(out, torch.tensor([0.05, 0.5, 1.0]))


def test_rule_lower_on_failure():
    level = torch.tensor([0.01, 0.5, 0.5])
    out = lower_on_failure(level, torch.tensor([False, True, False]), step=0.1)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.5, 0.4]))


def test_level_curriculum_applies_rules_per_env_and_round_trips():
    rules = [
        CurriculumRule("up", raise_on_success, {"step": 0.2}),
        CurriculumRule("down", lower_on_failure, {"step": 0.1}),
    ]
    c = LevelCurriculum(4, rules, init=0.5)
    c.on_episode_end(torch.tensor([0, 2]), torch.tensor([True, False]))
    torch.testing.assert_close(c.level, torch.tensor([0.7, 0.5, 0.4, 0.5]))
    other = LevelCurriculum(4, rules)
    other.load_state_dict(c.state_dict())
    torch.testing.assert_close(other.level, c.level)
    fewer = LevelCurriculum(3, rules)
    fewer.load_state_dict(c.state_dict())  # another env count (export, evaluation): the mean level everywhere
    torch.testing.assert_close(fewer.level, torch.full((3,), 0.525))
    off = LevelCurriculum(2, rules, init=0.0, enabled=False)
    off.on_episode_end(torch.tensor([0]), torch.tensor([False]))
    assert off.level.tolist() == [1.0, 1.0]
    torch.testing.assert_close(lerp(0.05, 0.2, torch.tensor([0.0, 0.5, 1.0])), torch.tensor([0.05, 0.125, 0.2]))


def test_load_per_env_copies_or_takes_the_mean_of_another_env_count():
    target = torch.zeros(3)
    load_per_env(target, torch.tensor([1.0, 2.0, 6.0], dtype=torch.float64))
    assert target.tolist() == [1.0, 2.0, 6.0] and target.dtype == torch.float32
    load_per_env(target, torch.tensor([2.0, 4.0]))  # saved with 2 envs: their mean everywhere
    assert target.tolist() == [3.0, 3.0, 3.0]
    load_per_env(target, torch.zeros(0))
    assert target.tolist() == [0.0, 0.0, 0.0]


# --- randomisation ----------------------------------------------------------------------------------------

_XML = """<mujoco><worldbody><body name="b"><freejoint/><geom name="g" size="0.1" mass="2"/></body>
<body name="arm" pos="0 0 1"><joint name="j" axis="0 1 0"/><geom size="0.05" mass="1"/></body></worldbody>
<actuator><position joint="j" kp="100" kv="5"/></actuator></mujoco>"""


def test_model_field_terms_write_each_env_and_keep_shared_fields_consistent():
    model = mujoco.MjModel.from_xml_string(_XML)
    sim = NativeSim(model, 3, num_threads=1)
    b = model.body("b").id
    terms = [
        ModelFieldTerm("mass", (FieldTarget("body_mass", (b,)),), 0.5, 1.5),
        ModelFieldTerm(
            "kp",
            (FieldTarget("actuator_gainprm", (slice(0, 1), 0)), FieldTarget("actuator_biasprm", (slice(0, 1), 1))),
            0.8,
            1.2,
            per_entry=True,
        ),
        ModelFieldTerm("kd", (FieldTarget("actuator_biasprm", (slice(0, 1), 2)),), 0.8, 1.2, per_entry=True),
    ]
    r = ModelFieldRandomizer(sim, terms, torch.Generator().manual_seed(0))
    r.apply(torch.tensor([0, 2]), "reset")
    mass = sim.model_field("body_mass")[:, b]
    draw = r.last_draw["mass"]
    torch.testing.assert_close(mass[[0, 2]].float(), 2.0 * draw)
    assert mass[1] == 2.0  # untouched env keeps the nominal value
    gain, bias = sim.model_field("actuator_gainprm"), sim.model_field("actuator_biasprm")
    torch.testing.assert_close(gain[[0, 2], 0, 0], -bias[[0, 2], 0, 1])  # Kp and its bias move together
    torch.testing.assert_close(bias[[0, 2], 0, 2].float(), -5.0 * r.last_draw["kd"][:, 0])  # Kd term kept Kp's write
    assert ((gain[[0, 2], 0, 0] >= 80) & (gain[[0, 2], 0, 0] <= 120)).all()
    with pytest.raises(ValueError, match="both at startup and at reset"):
        ModelFieldRandomizer(
            sim, [terms[0], ModelFieldTerm("m2", terms[0].targets, 1, 1, when="startup")], torch.Generator()
        )


def test_action_delay_shifts_the_control_stream_by_d_substeps():
    """decimation 4; env delays 0, 2, 4, 6 substeps; controls 1, 2, 3 at env steps 0, 1, 2 after a reset to 0.
    Substep j of env step t uses the control of step t - ceil((d - j) / 4) (the reset control before step 0)."""
    d = ActionDelay(4, nu=1, decimation=4, max_delay=6)
    assert d.depth == 3  # the current control and ceil(6 / 4) = 2 earlier ones
    d.reset(torch.arange(4), torch.zeros(4, 1), torch.tensor([0, 2, 4, 6]))
    out = [d.push(torch.full((4, 1), float(t + 1)))[:, :, 0] for t in range(3)]  # each (substeps, envs)
    assert [row.tolist() for row in out[2].T] == [
        [3, 3, 3, 3],  # d = 0: this step's control throughout
        [2, 2, 3, 3],  # d = 2: the previous step's for 2 substeps
        [2, 2, 2, 2],  # d = 4: one whole env step late
        [1, 1, 2, 2],  # d = 6: two steps back for 2 substeps, then one
    ]
    assert out[0][:, 3].tolist() == [0, 0, 0, 0] and out[1][:, 3].tolist() == [0, 0, 1, 1]  # the reset control
    d.reset(torch.tensor([1]), torch.full((1, 1), 9.0), torch.tensor([3]))  # one env restarts: only its ring refills
    row = d.push(torch.full((4, 1), 4.0))[:, :, 0].T
    assert row[1].tolist() == [9, 9, 9, 4] and row[3].tolist() == [2, 2, 3, 3]


def test_action_delay_without_a_delay_passes_the_control_through():
    ctrl = torch.ones(2, 3)
    assert ActionDelay(2, 3, decimation=4, max_delay=0).push(ctrl) is ctrl  # no ring at all
    d = ActionDelay(2, 3, decimation=4, max_delay=4)
    d.reset(torch.arange(2), torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    assert d.push(ctrl) is ctrl  # a ring, but every delay 0: the held (N, nu) control
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        d.reset(torch.arange(2), torch.zeros(2, 3), torch.tensor([0, 5]))
    with pytest.raises(ValueError):
        ActionDelay(1, 1, decimation=4, max_delay=-1)
