"""Policies from files for evaluation and play: ``policy=<run dir | checkpoint .pt | .onnx | zero | random>``.

Every policy is a callable mapping the env's actor observation (N, obs_dim) float32 tensor to actions (N,
num_actions). A file is checked against the task before anything runs: an ONNX file's metadata (task, joints,
observation terms, dims and history, control dt) must match the env's, and a checkpoint's actor must accept the env's
observation width; a mismatch is a :class:`PolicyLoadError` that names what differs. The policy's training settings
(its ``env.action_mode``, its standup MDP, its task) are read from its ONNX metadata or run config before an env is
built (:func:`policy_action_mode`, :func:`policy_mdp`, :func:`check_policy_task`). Evaluation
(:mod:`upright.training.evaluate`, :mod:`upright.training.lift_evaluate`) loads policies here; ``play.py``
(:mod:`upright.viewer.policy`) adds the VLA chunk policies of task=lift.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
from collections.abc import Callable

import torch

from upright.policy_io.schema import ENV_ACTION_MODES, PolicyMetadataError, action_mode_of, read_raw_metadata
from upright.policy_io.source import PolicyLoadError, check_metadata, resolve_policy_path

PolicyFn = Callable[[torch.Tensor], torch.Tensor]


def policy_action_mode(policy: str) -> str | None:
    """The ``env.action_mode`` (``relative`` | ``absolute``) the policy ``policy=`` names was trained with, so that
    play and evaluation build their env with it; None for ``zero``, ``random`` or a file that cannot be read (loading
    it reports why).

    - ONNX of metadata schema >= 3: its ``action_mode``.
    - ONNX of an older schema (its ``action_mode`` always said relative, whatever the run trained with): the
      ``env.action_mode`` of the run config beside it (:func:`upright.conf.run_files.config_beside`), relative
      without one.
    - checkpoint ``model_<it>.pt``: its run config's (:func:`upright.conf.run_files.run_config_for`); relative when
      the config predates the setting.

    Raises:
        PolicyLoadError: see :func:`resolve_policy_path`, or the file names an unknown mode.
    """
    from omegaconf import OmegaConf

    from upright.conf.run_files import config_beside, run_config_for

    if policy in ("zero", "random"):
        return None
    path = resolve_policy_path(policy)
    if path.suffix == ".onnx":
        try:
            meta = read_raw_metadata(path)
        except PolicyMetadataError:  # not a readable file: load_policy says why
            return None
    try:
        if path.suffix == ".onnx":
            if "action_mode" not in meta:
                return None
            if str(meta.get("upright_metadata_version")) not in ("1", "2"):
                return action_mode_of(meta, path, ENV_ACTION_MODES)
            config = config_beside(path)
        else:
            config = run_config_for(path)
    except PolicyMetadataError as err:
        raise PolicyLoadError(str(err)) from None
    except FileNotFoundError:
        return "relative"
    except Exception:  # noqa: BLE001 - not a readable file: load_policy says why
        return None
    return str(OmegaConf.load(config).get("env", {}).get("action_mode", "relative"))


def policy_mdp(policy: str) -> str | None:
    """The standup ``env.mdp`` (``host`` | ``getup``) the policy ``policy=`` names was trained with, so that play and
    evaluation build that MDP's env: an ONNX file's metadata ``mdp`` (``host`` when absent), a checkpoint's run config
    ``env.mdp`` (``host`` when the config predates it). None for ``zero``, ``random``, a file that cannot be read
    (loading it reports why) or a non-standup policy."""
    from omegaconf import OmegaConf

    from upright.conf.run_files import run_config_for

    if policy in ("zero", "random"):
        return None
    try:
        path = resolve_policy_path(policy)
        if path.suffix == ".onnx":
            meta = read_raw_metadata(path)
            return str(meta.get("mdp", "host")) if meta.get("task") == "standup" else None
        config = OmegaConf.load(run_config_for(path))
        if str(config.get("task_name", "standup")) != "standup":
            return None
        return str(config.get("env", {}).get("mdp", "host"))
    except Exception:  # noqa: BLE001 - not a readable file or config: load_policy says why
        return None


GAIN_SETTINGS = ("getup.natural_freq_hz", "getup.damping_ratio")
"""``env.*`` settings (without ``env.``) that set a ``recipe=getup`` policy's motor gains (Kp = I·ω², Kd = 2ζIω)."""


HISTORY_SETTING = "getup.actor_history"
"""``env.*`` setting (without ``env.``) of the frames a ``recipe=getup`` actor reads (ONNX metadata
``observation_history_length``)."""


def policy_env_settings(policy: str) -> dict[str, float | int]:
    """The env settings a ``recipe=getup`` policy was trained with that play and evaluation must repeat (keys without
    ``env.``): its gains (:data:`GAIN_SETTINGS`), so that they drive the motors as training did, from a checkpoint's
    run config or an ONNX file's metadata ``getup_natural_freq_hz`` / ``getup_damping_ratio`` (files exported before
    those keys, 2026-11-26: none, so the recipe's gains, 10.8 Hz since 2026-11-27; ``python -m
    upright.training.export --refresh-metadata FILE.onnx`` adds the keys from the run config beside it); and the
    frames its actor reads, :data:`HISTORY_SETTING` (int >= 1), so that they observe as training did. {}
    for other policies, ``zero``, ``random`` or a file that cannot be read (loading it reports why)."""
    from omegaconf import OmegaConf

    from upright.conf.run_files import run_config_for

    if policy_mdp(policy) != "getup":
        return {}
    try:
        path = resolve_policy_path(policy)
        if path.suffix == ".onnx":
            meta = read_raw_metadata(path)
            found = {key: meta.get("getup_" + key.split(".", 1)[1]) for key in GAIN_SETTINGS}
            history = meta.get("observation_history_length")
        else:
            config = OmegaConf.load(run_config_for(path))
            found = {key: OmegaConf.select(config, "env." + key, default=None) for key in GAIN_SETTINGS}
            history = OmegaConf.select(config, "env." + HISTORY_SETTING, default=None)
    except Exception:  # noqa: BLE001 - not a readable file or config: load_policy says why
        return {}
    out: dict[str, float | int] = {key: float(value) for key, value in found.items() if value is not None}
    # a run config or file from before the setting existed (2026-11-27) is a one-frame actor; 1 is stated too, since
    # recipe=getup reads 6 frames (2026-11-28)
    out[HISTORY_SETTING] = 1 if history is None else int(history)
    return out


def policy_task(policy: str) -> tuple[str, str] | None:
    """The task the policy ``policy=`` names was trained for, and where that is written: an ONNX file's metadata
    ``task`` (``"its ONNX metadata"``), a checkpoint's run config ``task_name``
    (:func:`upright.conf.run_files.run_config_for`; ``"its <config name>"``). None for ``zero``, ``random``, a file
    that cannot be read or says no task (loading it reports why)."""
    from omegaconf import OmegaConf

    from upright.conf.run_files import run_config_for

    if policy in ("zero", "random"):
        return None
    try:
        path = resolve_policy_path(policy)
        if path.suffix == ".onnx":
            meta = read_raw_metadata(path)
            return (str(meta["task"]), "its ONNX metadata") if "task" in meta else None
        config = run_config_for(path)
        return str(OmegaConf.load(config).get("task_name", "standup")), f"its {config.name}"
    except Exception:  # noqa: BLE001 - not a readable file or config: load_policy says why
        return None


def check_policy_task(policy: str, task: str, fix: str = "task={task}") -> None:
    """Refuse, before any env is built, a policy trained for another registered task than ``task``.

    Args:
        fix: how the message names the policy's task as the fix, ``{task}`` standing for it (``task={task}`` as
            play.py takes it, ``--task {task}`` for evaluate).

    Raises:
        PolicyLoadError: one line naming the policy's task (:func:`policy_task`) and the fix.
    """
    from upright.conf import TASKS

    found = policy_task(policy)
    if found is None or found[0] == task or found[0] not in TASKS:
        return
    other, where = found
    raise PolicyLoadError(
        f"policy={policy} is a policy of task={other} ({where} says so), not of task={task}; "
        f"use {fix.format(task=other)}"
    )


def expected_metadata(task_name: str, env) -> dict:
    """The ONNX metadata an exported policy of ``task_name`` carries for this env (what train.py writes)."""
    from upright.tasks.registry import policy_metadata

    return policy_metadata(task_name, env)


def zero_policy(num_actions: int) -> PolicyFn:
    """Always zero actions (the PD targets stay at the measured pose)."""
    return lambda obs: torch.zeros(obs.shape[0], num_actions, device=obs.device)


def random_policy(num_actions: int, seed: int = 0) -> PolicyFn:
    """Uniform actions in [-1, 1] (the actor's tanh range), from its own seeded generator."""
    gen = torch.Generator().manual_seed(seed)

    def act(obs: torch.Tensor) -> torch.Tensor:
        return (torch.rand(obs.shape[0], num_actions, generator=gen) * 2.0 - 1.0).to(obs.device)

    return act


def onnx_policy(path: str | pathlib.Path, expected: dict, obs_dim: int) -> PolicyFn:
    """An exported policy run with onnxruntime (one thread, :class:`upright.policy_io.mlp.OnnxMlp`), after checking its
    metadata against ``expected`` (:func:`upright.policy_io.source.check_metadata`).

    Returns:
        ``fn(obs)``: actions (N, J) float32 on ``obs``'s device for observations (N, obs_dim); ``fn.metadata`` is the
        file's decoded metadata.

    Raises:
        PolicyLoadError: no upright metadata, metadata of another task/robot, an input width that differs, or a graph
            onnxruntime cannot load.
    """
    from upright.policy_io.registry import find_loader
    from upright.policy_io.schema import read_metadata

    try:
        meta = read_metadata(path)
    except PolicyMetadataError as err:
        raise PolicyLoadError(str(err)) from None
    except Exception as err:  # noqa: BLE001  not an ONNX file at all
        raise PolicyLoadError(f"{path}: cannot read as an ONNX model ({type(err).__name__}: {err})") from None
    check_metadata(meta, expected, path)
    found = find_loader(str(path), ["mlp"])
    if found is None:  # read_metadata accepted it, so only a VLA or residual file lands here
        raise PolicyLoadError(f"{path}: not an MLP policy file")
    try:
        run = found[1](path, obs_dim=obs_dim)
    except PolicyMetadataError as err:
        raise PolicyLoadError(str(err)) from None

    def act(obs: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(run(obs.detach().to("cpu", torch.float32).numpy())).to(obs.device)

    act.metadata = meta  # type: ignore[attr-defined]
    return act


def checkpoint_policy(
    path: str | pathlib.Path, env, train_cfg, device: str = "cpu", task_name: str = "standup"
) -> PolicyFn:
    """A training checkpoint ``model_<it>.pt``: env + ``UprightRunner`` as train.py builds them, then
    ``runner.load`` and ``get_inference_policy`` (deterministic actions).

    The actor's layout (``train.actor_hidden_dims`` and the rest of ``train.*``) comes from the run's
    ``config_<n>.yaml`` beside the checkpoint when there is one (the run was trained with it, whatever the command line
    of play or evaluate says), else from ``train_cfg``.

    Raises:
        PolicyLoadError: not a checkpoint, or its actor does not fit the task's observation/action sizes.
    """
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner

    try:
        data = torch.load(str(path), weights_only=False, map_location="cpu")
    except Exception as err:  # noqa: BLE001  anything torch.load raises: not a checkpoint
        raise PolicyLoadError(f"{path}: cannot read as a torch checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(data, dict) or "actor_state_dict" not in data:
        keys = sorted(data)[:8] if isinstance(data, dict) else type(data).__name__
        raise PolicyLoadError(f"{path}: not an upright training checkpoint (no actor_state_dict; has {keys})")
    saved = _saved_train_cfg(pathlib.Path(path))
    if saved is not None:
        train_cfg = saved
    threads = torch.get_num_threads()
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints the model layout
        runner = UprightRunner(env, rsl_rl_config(train_cfg), log_dir=None, device=device)
    torch.set_num_threads(threads)  # the runner sets 1 thread for collection; play is light either way
    try:
        runner.load(str(path), load_cfg={"actor": True}, map_location=device)
    except RuntimeError as err:  # size mismatch in load_state_dict
        first = " ".join(str(err).split())[:400]
        raise PolicyLoadError(
            f"{path} does not fit task '{task_name}' with train.* as configured "
            f"(observation {env.get_observations()['actor'].shape[-1]}, actions {env.num_actions}, "
            f"actor {list(train_cfg.actor_hidden_dims)}): {first}"
        ) from None
    policy = runner.get_inference_policy(device)
    td_cls = type(env.get_observations())

    def act(obs: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            td = td_cls({"actor": obs, "critic": obs}, batch_size=[obs.shape[0]], device=obs.device)
            return policy(td)

    return act


def _saved_train_cfg(checkpoint: pathlib.Path):
    """The ``train`` section of the run config beside ``checkpoint`` (:func:`upright.conf.run_files.run_config_for`),
    or None where there is none or it cannot be read (the caller's config is used then)."""
    from upright.conf import load_run_config
    from upright.conf.run_files import run_config_for

    try:
        return load_run_config(run_config_for(checkpoint)).train
    except (FileNotFoundError, ValueError):
        return None


def load_policy(spec: str, env, task_name: str, train_cfg=None, device: str = "cpu", seed: int = 0) -> PolicyFn:
    """Build the policy ``spec`` names for ``env``.

    Args:
        spec: run directory, ``.pt``, ``.onnx``, ``zero`` or ``random`` (``play.py`` adds VLA chunk policies:
            :func:`upright.viewer.policy.load_policy`).
        env: the task env (its observation width and joints are what the policy must fit).
        task_name: the task (checked against ONNX metadata).
        train_cfg: the task's ``train`` config (actor layout of checkpoints; default :class:`TrainCfg`).

    Raises:
        PolicyLoadError: see :func:`resolve_policy_path`, :func:`check_policy_task`, :func:`onnx_policy`,
            :func:`checkpoint_policy`.
    """
    if spec == "zero":
        return zero_policy(env.num_actions)
    if spec == "random":
        return random_policy(env.num_actions, seed)
    check_policy_task(spec, task_name)
    path = resolve_policy_path(spec)
    obs_dim = int(env.get_observations()["actor"].shape[-1])
    if path.suffix == ".onnx":
        return onnx_policy(path, expected_metadata(task_name, env), obs_dim)
    if train_cfg is None:  # the default actor layout
        from omegaconf import OmegaConf

        from upright.conf.train_cfg import TrainCfg

        train_cfg = OmegaConf.structured(TrainCfg)
    return checkpoint_policy(path, env, train_cfg, device, task_name)
