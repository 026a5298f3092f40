"""Hydra structured configs for ``train.py`` / ``play.py``: config groups ``task`` (one entry per task: ``standup``,
``lift``), ``terrain`` and ``posture`` (the standup task's variants; other tasks select their empty option ``none``).

Command line: ``python train.py task=standup terrain=platform posture=supine env.num_envs=256
train.max_iterations=100 seed=3 run.name=my_run resume=logs/standup/my_run``.

``terrain=<name>`` sets ``env.terrain`` and the terrain's HoST values of other ``env.*`` fields
(:meth:`upright.tasks.standup.terrains.TerrainSpec.env_overrides`); ``posture=<name>`` sets ``env.posture``, the
posture's HoST ``env.*`` values (:data:`~upright.tasks.standup.terrains.settings.POSTURE_ENV_OVERRIDES`; prone:
Kp/Kd ranges, ungated pull force) and ``train.group_weights`` (prone [1, 0.1, 1, 1]).
Explicit ``env.*`` overrides on the command line still win.

``recipe=<name>`` (:data:`RECIPES`) sets the training recipe: ``host`` is HoST's recipe as published; ``getup`` is
the get-up MDP (``docs/experiments/2026-11-26_getup_recipe.md``); ``cartesian`` is upright's lift recipe
(``task=lift recipe=cartesian``; without it the lift task trains with Playground's settings,
``docs/lift_learning.md``); ``vlm_kneel`` trains the G1 to kneel from a sentence through a CLIP reward
(``docs/vlm_reward.md``). Explicit ``env.*`` and ``train.*`` overrides still win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from upright.conf.train_cfg import TrainCfg
from upright.policy_io.residual_base import ResidualCfg
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.rewards.variants import POSTURE_REWARDS
from upright.tasks.standup.terrains import POSTURE_NAMES, TERRAINS
from upright.tasks.standup.terrains.settings import POSTURE_ENV_OVERRIDES


@dataclass
class RunCfg:
    """Where a run writes: ``<root>/<task_name>/<name>``."""

    name: str = "${now:%Y-%m-%d_%H-%M-%S}"
    """Run name (default: the start time)."""
    root: str = "logs"
    """Root folder of all runs."""


@dataclass
class StandupTaskCfg:
    """``task=standup``: G1 standing up from supine on flat ground (HoST)."""

    task_name: str = "standup"
    env: StandupEnvCfg = field(default_factory=StandupEnvCfg)
    sim: SimCfg = field(default_factory=SimCfg)
    train: TrainCfg = field(default_factory=TrainCfg)


def lift_train_cfg() -> TrainCfg:
    """PPO defaults of ``task=lift``, after MuJoCo Playground's brax PPO settings for ``PandaPickCube``
    (``mujoco_playground/config/manipulation_params.py``: discount 0.97, learning rate 1e-3, policy MLP 4 x 32, value
    MLP 5 x 256, observation normalisation). upright's own: the three critics share one trunk with a head per reward
    group (``critic_shared_trunk``), group weights (reach 1, lift 2, regularization 0.1: Playground's 4:8 scale ratio
    of gripper-box to box-target, regularisation small; not tuned yet), rsl-rl's 24 steps per env and 5 epochs x 4
    mini-batches, entropy 0.01, no L2C2."""
    return TrainCfg(
        max_iterations=1500,
        num_steps_per_env=24,
        save_interval=50,
        group_weights=[1.0, 2.0, 0.1],
        actor_hidden_dims=[32, 32, 32, 32],
        critic_hidden_dims=[256, 256, 256, 256, 256],
        critic_shared_trunk=True,
        init_noise_std=1.0,
        gamma=0.97,
        lam=0.95,
        entropy_coef=0.01,
        l2c2_policy_coef=0.0,
        l2c2_value_coef=0.0,
    )


@dataclass
class LiftTaskCfg:
    """``task=lift``: a Franka Panda picks up a cube and lifts it to a target (Playground ``PandaPickCube``)."""

    task_name: str = "lift"
    env: LiftEnvCfg = field(default_factory=LiftEnvCfg)
    sim: SimCfg = field(default_factory=lambda: SimCfg(timestep=0.005))
    train: TrainCfg = field(default_factory=lift_train_cfg)


NO_VARIANT = "none"
"""The empty option of the ``terrain``, ``posture`` and ``recipe`` groups: every task but standup selects it unless the
command line names one (terrains and postures are standup's only; a recipe must be one of the task's own,
:data:`RECIPE_TASKS`)."""

TASK_GROUPS_OFF = ("terrain", "posture", "recipe")
"""Config groups of the standup task that other tasks switch to :data:`NO_VARIANT`."""


def task_of(args: list[str]) -> str:
    """The ``task=`` of command-line ``args`` (default ``standup``)."""
    return next((a.split("=", 1)[1] for a in args if a.startswith("task=")), "standup")


def with_task_groups(args: list[str]) -> list[str]:
    """``args`` plus ``terrain=none posture=none recipe=none`` when the task is not standup (those groups are the
    standup task's; the primary defaults list selects standup's ``ground``/``supine``/``host``)."""
    if task_of(args) == "standup":
        return list(args)
    given = {a.split("=", 1)[0] for a in args}
    return list(args) + [f"{g}={NO_VARIANT}" for g in TASK_GROUPS_OFF if g not in given]


RECIPES: dict[str, dict[str, Any]] = {
    "host": {},
    "getup": {
        # the get-up MDP of MuJoCo Playground's Go1Getup and mujocolab/mjlab_playground's g1-getup branch
        # (upright.tasks.standup.getup): standing and dropped starts, actions relative to the measured q (scale 0.6,
        # 0.6 s settle after a drop), 5 Hz reflected-inertia gains, one reward group, 6 s episodes, no pull force;
        # PPO as mjlab_playground's rl_cfg.py (24 steps per env, [512, 256, 128] ELU, unbounded Gaussian, std 1.0)
        "env.mdp": "getup",
        "env.episode_length_s": 6.0,
        "env.curriculum.enabled": False,
        "env.curriculum.beta_init": 0.6,
        "env.curriculum.beta_min": 0.6,
        "train.num_steps_per_env": 24,
        "train.group_weights": [1.0],
        "train.critic_hidden_dims": [512, 256, 128],
        "train.actor_tanh": False,
        "train.init_noise_std": 1.0,
        "train.l2c2_policy_coef": 0.0,
        "train.l2c2_value_coef": 0.0,
        "train.save_interval": 25,
    },
    "cartesian": {
        # upright's lift recipe for a 2-core CPU (docs/lift_learning.md, sessions 12-17): Cartesian actions through
        # differential IK with gravity-compensated targets, the grasp-gated carry reward instead of Playground's lifted
        # term, a quarter of the resets with the cube already grasped, a faster curriculum and a fixed learning rate;
        # since session 17 a one-sided anti-windup bound switched on per env at curriculum level 0.5, a success bonus
        # and a sharp goal term (95 % first reached at 33 / 49 / 43 min in seeds 3 / 4 / 5; session 14's recipe:
        # 91.6 % at 42 min)
        "env.action_mode": "ee_delta",
        "env.ee_gravity_compensation": True,
        "env.ee_max_lead_down": 0.05,
        "env.curriculum.ee_max_lead_down_level": 0.5,
        "env.rewards.at_target": 10.0,
        "env.rewards.box_target_fine": 4.0,
        "env.rewards.lifted": 0.0,
        "env.rewards.carry": 16.0,
        "env.curriculum.grasped_start_fraction": 0.25,
        "env.curriculum.step_up": 0.1,
        "env.curriculum.step_down": 0.1,
        "train.schedule": "fixed",
        "train.learning_rate": 1e-3,
    },
}
"""``recipe=<name>``: dotted ``env.*`` / ``train.*`` values each recipe sets on top of its task's defaults (standup:
HoST's; lift: MuJoCo Playground's ``PandaPickCube``)."""


RECIPES["vlm_kneel"] = {
    # a G1 pose from one sentence (VLM-RMs, Rocamonde et al., ICLR 2024; docs/vlm_reward.md): the get-up MDP with every
    # start standing and its standing terms off (its regularisation kept), plus a CLIP reward for the prompt in its own
    # group and critic. The paper learned kneeling only with its largest CLIP (ViT-bigG-14); needs a GPU. Not tuned,
    # and not trained here (no weights can be downloaded on the machine it was written on).
    **RECIPES["getup"],
    "env.num_envs": 256,
    "env.getup.stand_fraction": 1.0,
    "env.getup.fall_fraction": 0.0,
    "env.getup.rewards.orientation": 0.0,
    "env.getup.rewards.torso_height": 0.0,
    "env.getup.rewards.pelvis_height": 0.0,
    "env.getup.rewards.posture": 0.0,
    "env.vlm_reward.enabled": True,
    "env.vlm_reward.model": "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k",
    "env.vlm_reward.goal_prompt": "a humanoid robot kneeling",
    "env.vlm_reward.baseline_prompt": "a humanoid robot",
    "env.vlm_reward.alpha": 0.5,
    "env.vlm_reward.every": 2,
    "env.vlm_reward.dtype": "bfloat16",
    "env.vlm_reward.group": "vlm",
    "train.group_weights": [0.1, 1.0],
}

RECIPE_TASKS: dict[str, str] = {
    "host": "standup",
    "getup": "standup",
    "cartesian": "lift",
    "vlm_kneel": "standup",
}
"""The task each recipe of :data:`RECIPES` is written for (its keys exist only in that task's config)."""


def task_defaults() -> list[Any]:
    """Hydra defaults list of every top-level config: the ``task`` group (standup), the ``terrain`` (ground),
    ``posture`` (supine) and ``recipe`` (host) groups, then the config itself; Hydra's own logging is off (upright
    prints its own progress)."""
    return [
        {"task": "standup"},
        {"terrain": "ground"},
        {"posture": "supine"},
        {"recipe": "host"},
        "_self_",
        {"override hydra/job_logging": "none"},
        {"override hydra/hydra_logging": "none"},
    ]


@dataclass
class Config:
    """Top-level config. ``task`` picks env/sim/train defaults; the rest are run settings."""

    defaults: list[Any] = field(default_factory=task_defaults)
    seed: int = 1
    """Seed of torch, numpy and the env RNG."""
    device: str = "cpu"
    """Torch device of the networks (``cpu`` or ``cuda:0``)."""
    resume: str | None = None
    """Run directory or checkpoint ``.pt`` to continue from (iteration count and optimizer state)."""
    run: RunCfg = field(default_factory=RunCfg)
    policy: ResidualCfg = field(default_factory=ResidualCfg)
    """Residual RL on a frozen base policy (``policy.base=<VLA>``, task=lift; :mod:`upright.vla.residual`)."""
    task_name: str = MISSING
    env: Any = MISSING
    sim: Any = MISSING
    train: Any = MISSING


TASKS = {"standup": StandupTaskCfg, "lift": LiftTaskCfg}
"""Registered tasks (``task=<name>``)."""


REMOVED_SETTINGS: tuple[str, ...] = (
    "env.assisted_start",
    "env.state_archive",
    "env.rise_path",
    "env.curriculum.pull_assisted",
)
"""Standup settings of levers that measured no gain, removed on 2026-11-26 with ``recipe=fast`` (their code last lived
in commit :data:`REMOVED_IN`; ``docs/standup_learning.md``, "Removed levers"). A run config saved before loads without
them (:func:`load_run_config`): they only shaped training starts and the pull force, not the policy's inputs or actions,
so evaluation, export and play of such a run are unchanged. An override of one is refused with that commit named."""

REMOVED_IN = "a5b5807"
"""The commit where the code of :data:`REMOVED_SETTINGS` last lived."""


def removed_setting(key: str) -> str | None:
    """The entry of :data:`REMOVED_SETTINGS` that the dotted ``key`` is, or lies under; None for any other key."""
    return next((r for r in REMOVED_SETTINGS if key == r or key.startswith(r + ".")), None)


BEHAVIOUR_BEFORE_SETTING: dict[str, Any] = {"env.rewards.carry_off_floor": False}
"""Settings whose default is not what runs saved before the setting existed did: a saved config without the key gets
this value (the behaviour it was trained with), not the default. ``carry_off_floor``: the carry term was ungated
until session 12."""


def load_run_config(path) -> Any:
    """A run's saved ``config_<n>.yaml`` (or an exported ``config.yaml``) as a DictConfig whose ``env``, ``sim`` and
    ``train`` sit on their task's typed schema, so that a setting added after the run was saved gets its default
    instead of a missing-key error, or, where that default changed the behaviour, the value of
    :data:`BEHAVIOUR_BEFORE_SETTING`; the settings of :data:`REMOVED_SETTINGS` are dropped.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file names no registered task (``task_name``), or holds a key the schema no longer has.
    """
    import pathlib

    if not pathlib.Path(path).is_file():
        raise FileNotFoundError(f"run config {path} does not exist")
    cfg = OmegaConf.load(path)
    for key in REMOVED_SETTINGS:  # levers removed since the run was saved (all off in evaluation, export and play)
        parent, leaf = key.rsplit(".", 1)
        node = OmegaConf.select(cfg, parent)
        if OmegaConf.is_dict(node) and leaf in node:
            node.pop(leaf)
    absent = [key for key in BEHAVIOUR_BEFORE_SETTING if OmegaConf.select(cfg, key) is None]
    task = TASKS.get(str(cfg.get("task_name", "standup")))
    if task is None:
        raise ValueError(f"{path}: task_name={cfg.get('task_name')!r} is not one of {sorted(TASKS)}")
    schema = task()
    try:
        for key in ("env", "sim", "train"):
            if key in cfg:
                cfg[key] = OmegaConf.merge(OmegaConf.structured(getattr(schema, key)), cfg[key])
    except Exception as err:  # noqa: BLE001  omegaconf's ConfigKeyError / ValidationError
        raise ValueError(f"{path}: {str(err).splitlines()[0]}; the config predates a change of its schema") from None
    for key in absent:
        if OmegaConf.select(cfg, key) is not None:  # the schema has it: the run predates it
            OmegaConf.update(cfg, key, BEHAVIOUR_BEFORE_SETTING[key])
    return cfg


def _nested(dotted: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        *heads, leaf = key.split(".")
        node = out
        for h in heads:
            node = node.setdefault(h, {})
        node[leaf] = value
    return out


def register_configs() -> None:
    """Register the structured configs with Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="config", node=Config)
    for name, node in TASKS.items():
        # A plain dict of typed sub-configs, so it merges into the top level (package _global_)
        # while env/sim/train keep their dataclass schema (unknown keys and bad types are errors).
        task = node()
        typed = {k: OmegaConf.structured(getattr(task, k)) for k in ("env", "sim", "train")}
        cs.store(group="task", name=name, node={"task_name": task.task_name, **typed}, package="_global_")
    for group in TASK_GROUPS_OFF:
        cs.store(group=group, name=NO_VARIANT, node={}, package="_global_")
    for name, spec in TERRAINS.items():
        cs.store(group="terrain", name=name, node={"env": _nested(spec.env_overrides())}, package="_global_")
    for name in POSTURE_NAMES:
        env = _nested({"posture": name, **POSTURE_ENV_OVERRIDES[name]})
        train = {"group_weights": list(POSTURE_REWARDS[name].group_weights)}
        cs.store(group="posture", name=name, node={"env": env, "train": train}, package="_global_")
    for name, values in RECIPES.items():
        cs.store(group="recipe", name=name, node=_nested(values), package="_global_")
