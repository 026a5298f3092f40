"""Typed training configuration: PPO (HoST settings), networks, checkpointing.

PPO settings follow HoST (``legged_robot_config.py`` + G1 overrides; spec §3).
"""

from __future__ import annotations

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
    group_weights: list[float] = field(default_factory=lambda: [2.5, 0.1, 1.0, 1.0])
    """Advantage weights of the reward groups (task, regularization, style, post_task), HoST."""
    actor_hidden_dims: list[int] = field(default_factory=lambda: [512, 256, 128])
    """Actor MLP (ELU, Tanh output), HoST."""
    critic_hidden_dims: list[int] = field(default_factory=lambda: [512, 256])
    """Each critic's MLP (ELU), HoST."""
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
    update_threads: int = 0
    """Torch threads for the PPO update on CPU (0 = all CPUs). Collection always uses 1 torch thread so the
    physics thread pool has the cores (measured: 2 torch threads made env stepping ~2x slower under load)."""
    init_at_random_ep_len: bool = True
    """Start envs at random episode steps so resets spread out (HoST)."""
