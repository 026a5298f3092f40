"""Typed training configuration: PPO (HoST settings), networks, checkpointing.

PPO settings follow HoST (``legged_robot_config.py`` + G1 overrides; spec §3); L2C2 smoothness weights from
HoST's ``ppo.py`` / ``g1_config_ground.py`` (spec §5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class TrainCfg:
    """Runner, algorithm and network settings."""

    max_iterations: int = 12000
    """Total PPO iterations of the run (a resumed run continues up to this count). HoST ground: 12000."""
    num_steps_per_env: int = 50
    """Env steps per env per iteration (HoST)."""
    save_interval: int = 10
    """Checkpoint (and ONNX export) every this many iterations; also at exit."""
    onnx_snapshots: bool = False
    """Also keep a copy of each export as ``policy_<completed iterations>.onnx`` (for learning curves of runs whose
    checkpoints cannot be evaluated alone, e.g. residual runs: ``benchmarks/lift_learning.py``)."""
    group_weights: list[float] = field(default_factory=lambda: [2.5, 0.1, 1.0, 1.0])
    """Advantage weights of the reward groups (task, regularization, style, post_task), HoST."""
    actor_hidden_dims: list[int] = field(default_factory=lambda: [512, 256, 128])
    """Actor MLP (ELU, Tanh output), HoST."""
    critic_hidden_dims: list[int] = field(default_factory=lambda: [512, 256])
    """Each critic's MLP (ELU), HoST."""
    critic_shared_trunk: bool = False
    """Not HoST: the critics share one [512, 256] trunk with a linear head per reward group (about 1/4 of the
    critic FLOPs; ``benchmarks/bench_ppo_update.py``). False: HoST's separate critics."""
    actor_tanh: bool = True
    """Pass the actor's mean action through Tanh (HoST's actor, :class:`~upright.training.multi_critic_model.
    TanhActorModel`). False: rsl-rl's plain ``MLPModel`` (unbounded mean; mjlab and ``recipe=getup``)."""
    init_noise_std: float = 0.8
    """Initial action std (state-independent), HoST."""
    obs_normalization: bool = True
    """Empirical observation normaliser in actor and critics (exported into the ONNX file)."""
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.01
    learning_rate: float = 1.0e-3
    max_grad_norm: float = 1.0
    schedule: str = "adaptive"
    desired_kl: float = 0.01
    l2c2_policy_coef: float = 1.0 * 0.1 / (1.0 - 0.1)
    """λ_π of the L2C2 smoothness term ``λ_π·mean‖μ(s_t) − μ(s̄)‖²`` (HoST spec §5): ``upper·ε`` with
    ``ε = lower/(upper − lower)``, HoST ``smoothness_upper_bound`` 1.0 and ``smoothness_lower_bound`` 0.1, so 0.111
    (the paper states λ_π = 1). 0 here and in ``l2c2_value_coef`` disables L2C2 (the plain PPO update)."""
    l2c2_value_coef: float = 0.1 * 1.0 * 0.1 / (1.0 - 0.1)
    """λ_V of the L2C2 term ``λ_V·mean‖V(s_t) − V(s̄)‖²`` over the 4 critics' values (HoST spec §5):
    ``value_smoothness_coef`` 0.1 · λ_π = 0.0111 (HoST wall task: 0.25 · λ_π; paper: λ_V = 0.1)."""
    std_learning_rate: float | None = None
    """Fixed Adam learning rate of the action std, in a parameter group outside the adaptive-KL schedule
    (``upright/training/std_learning_rate.py`` says why). None: rsl_rl's single group, as HoST. Not HoST's recipe."""
    critic_learning_rate: float | None = None
    """Fixed Adam learning rate of the critics, in a parameter group outside the adaptive-KL schedule (which follows
    the actor's KL and, at this project's batch sizes, sits at its 1e-5 floor, so the critics barely learn). None:
    rsl_rl's shared rate, as HoST. Not HoST's recipe."""
    mask_unapplied_actions: bool = False
    """Leave the transitions whose action the env ignored (the standup env's unactuated start, where the robot falls
    whatever the policy does) out of the policy gradient (their advantage is zeroed; the critics still learn from
    them). False: every transition counts, as HoST. Not HoST's recipe."""
    resume_std: float | None = None
    """On ``resume=``, set every entry of the action std to this value (and clear its Adam moments) before
    training on; e.g. less exploration noise when fine-tuning a policy. None keeps the checkpoint's std. Only
    valid with ``resume=`` (a new run starts from ``init_noise_std``)."""
    init_policy: str | None = None
    """Not HoST: start a NEW run's actor (MLP weights and observation normaliser) from an exported upright policy
    file (``policy.onnx``) whose metadata matches this env, e.g. ``upright/assets/policies/g1_getup/policy.onnx``:
    fine-tuning a committed or deployed policy whose checkpoint is gone (:mod:`upright.training.warm_start`). Its
    action std is :attr:`init_noise_std`; the critic starts fresh (see :attr:`critic_warmup_iterations`). The
    iteration count starts at 0. Not valid with ``resume=`` (a checkpoint holds the whole state). None: a freshly
    initialised actor."""
    critic_warmup_iterations: int = 0
    """Not HoST: for the first this many iterations of the run (counted from 0, so a resume past them does not repeat
    them) the update trains the critics only: the actor's weights, action std and observation normaliser stay, and the
    adaptive-KL schedule pauses. For a run started from :attr:`init_policy`, whose fresh critic would otherwise give
    the actor advantages of an untrained value function. 0: off."""
    noise_cut_iteration: int | None = None
    """Not HoST: once this many iterations are complete (counting those before a resume), set every entry of the
    action std to :attr:`noise_cut_std` (Adam moments cleared) and the entropy coefficient to
    :attr:`noise_cut_entropy_coef` (:func:`upright.training.std_learning_rate.apply_noise_cut`): a second stage of
    less exploration noise, so that a policy that has learned to get up learns to balance
    (``docs/experiments/2026-11-27_getup_action_noise.md``). The cut follows the update of that iteration (rsl-rl
    saves it as ``model_<iteration - 1>.pt``); a run resumed past it without it (a checkpoint from before this
    setting) gets it at the resume, unless ``train.resume_std`` sets the std there. None: never."""
    noise_cut_std: float = 0.4
    """The action std set at :attr:`noise_cut_iteration`, in action units (> 0)."""
    noise_cut_entropy_coef: float = 0.0
    """The entropy coefficient from :attr:`noise_cut_iteration` on (>= 0)."""
    noise_cut_metric: str | None = None
    """Not HoST: also cut (as at :attr:`noise_cut_iteration`, whichever comes first) once the moving mean of this
    episode metric over :attr:`noise_cut_metric_window` iterations reaches :attr:`noise_cut_metric_at_least`
    (:class:`upright.training.noise_cut.MetricTrigger`; the first episode length of iterations after a start or a
    resume is not counted). E.g. ``Metrics/pelvis_passed_0.5`` for ``recipe=getup``: cut the noise once the policy
    gets up. A name the env never logs stops the run with a one-line error (after a checkpoint). None: off."""
    noise_cut_metric_at_least: float = 0.9
    """The threshold of :attr:`noise_cut_metric`'s moving mean, in the metric's units. 0.9 is a choice, not a
    measurement: the trigger is off until an A/B picks it."""
    noise_cut_metric_window: int = 10
    """Iterations in :attr:`noise_cut_metric`'s moving mean (>= 1); 10, as ``benchmarks/getup_indicators.py``
    smooths."""
    use_mixed_precision: bool = False
    """Not HoST: run the PPO update's forward passes and losses under ``torch.autocast(dtype=bfloat16)`` (rsl-rl's
    ``use_mixed_precision``); parameters, gradients and Adam moments stay float32. About 2x faster on a CPU with
    AVX512-BF16 (``benchmarks/bench_ppo_update.py``)."""
    update_threads: int = 0
    """Torch threads for the PPO update on CPU (0 = all CPUs). Collection always uses 1 torch thread so the
    physics thread pool has the cores (measured: 2 torch threads made env stepping ~2x slower under load)."""
    init_at_random_ep_len: bool = True
    """Start envs at random episode steps so resets spread out (HoST)."""


def noise_cut_problem(iteration: int, std: float, entropy_coef: float) -> str | None:
    """One-line error for ``train.noise_cut_*`` values that cannot be applied, naming the key; None when they can."""
    if int(iteration) < 1:
        return f"train.noise_cut_iteration must be >= 1 or null (got {iteration})."
    if not float(std) > 0:
        return f"train.noise_cut_std must be > 0 (an action std, e.g. 0.4), got {std}."
    if not float(entropy_coef) >= 0:
        return f"train.noise_cut_entropy_coef must be >= 0, got {entropy_coef}."
    return None


def noise_cut_metric_problem(metric, at_least, window) -> str | None:
    """One-line error for ``train.noise_cut_metric*`` values that cannot be used, naming the key; None when they can
    (``metric`` None: the trigger is off, nothing else is checked)."""
    if metric is None:
        return None
    if not isinstance(metric, str) or not metric.strip():
        return (
            f"train.noise_cut_metric must be a logged metric's name, e.g. Metrics/pelvis_passed_0.5, or null "
            f"(got {metric!r})."
        )
    try:
        at_least = float(at_least)
    except (TypeError, ValueError):
        at_least = float("nan")
    if not math.isfinite(at_least):
        return f"train.noise_cut_metric_at_least must be a finite number, e.g. 0.9 (got {at_least})."
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        return f"train.noise_cut_metric_window must be an integer >= 1 (iterations), e.g. 10 (got {window!r})."
    return None
