"""Residual RL on a frozen base policy: ``a = clip(a_base + α · a_res, ±action_clip)``.

The base (any :class:`~upright.vla.policy.ChunkPolicy`: a TinyVLA, an exported VLA ``.onnx``, a remote openpi
server) stays frozen and is queried once per env step for all envs in one batch, through its own chunk queue. PPO
trains only the residual π_res, whose observation is the env's observation followed by the base's action of this
step (Policy Decorator, Yuan et al., ICLR 2025, section 4.1; ResFiT, Ankile et al. 2025, section III: both feed the
base action to the residual). π_res's mean starts at exactly 0 (its last layer is zeroed), so training starts from
the base's behaviour; |α · a_res| <= α because the actor's mean is tanh-squashed and the residual action is clipped
to [-1, 1]. α can rise linearly from ``alpha_start`` over the first env steps (Policy Decorator's progressive
exploration, section 4.2).

``python train.py task=lift policy.base=runs/tiny_vla policy.alpha=0.3`` wraps the lift env in a
:class:`ResidualEnv`; the run directory then also holds ``base_policy.onnx`` (or the base's checkpoint file),
``base_checksum.json`` (SHA-256 of the base's weights at the start and at the end of training) and ``policy.onnx``,
the residual graph whose metadata names the base file, its checksum and α (:func:`residual_metadata`).
:class:`ResidualChunkPolicy` runs the pair from those two files.

Actions are the lift env's: dimensionless deltas of the position targets in [-1, 1] (``action_convention``
``"delta"``); a base with absolute actions is refused.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
from typing import Any

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from upright.vla.policy import ChunkPolicy
from upright.vla.residual_config import ResidualCfg, check_residual_cfg, resolve_base_file

BASE_ACTION_TERM = "base_action"
"""Name of the observation term appended for the residual (the base's action of this step, (A,) in [-1, 1])."""


def file_sha256(path: str | pathlib.Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parameters_sha256(policy: Any) -> str | None:
    """Hex SHA-256 over a torch policy's state dict (names, dtypes, shapes and bytes, in key order); None for a
    policy without one (an ONNX or remote base: its file checksum is the record)."""
    if not hasattr(policy, "state_dict"):
        return None
    h = hashlib.sha256()
    for name, t in policy.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


class ResidualEnv(VecEnv):
    """rsl-rl ``VecEnv`` over a lift env whose actions are residuals on a frozen base policy (module docstring).

    Observations: the env's groups, with ``actor`` and ``critic`` extended by the base's action of this step:
    (N, D + A) float32. Actions: (N, A) residuals in [-1, 1]; the env receives ``clip(a_base + α a_res)``.

    Args:
        env: the lift env (:class:`~upright.tasks.lift.env.LiftEnv`).
        base: the frozen base policy (``action_convention`` ``"delta"``, ``action_dim`` = the env's).
        spec: the base's inputs as :func:`upright.vla.evaluate_lift.load_chunk_policy` describes them.
        cfg: α and its ramp, the instruction (:class:`ResidualCfg`).
        steps_per_iteration: env steps per training iteration (turns ``alpha_ramp_iterations`` into env steps).

    Raises:
        ValueError: a base with absolute actions or another action size, or a base reading cameras the env does not
            render (the message names the fix).
    """

    def __init__(self, env, base: ChunkPolicy, spec: dict, cfg: ResidualCfg, steps_per_iteration: int = 24):
        from upright.tasks.lift.record_demos import TASK

        check_residual_cfg(cfg, "lift")
        if getattr(base, "action_convention", "delta") != "delta":
            raise ValueError("policy.base has absolute actions; the residual hook needs a base with delta actions "
                             "(the lift env's convention): retrain it with upright.vla.train_bc")  # fmt: skip
        if int(base.action_dim) != int(env.num_actions):
            raise ValueError(f"policy.base outputs {base.action_dim} actions, the env takes {env.num_actions}")
        cams = list(spec.get("cameras", []))
        if cams and not env.cfg.camera.enabled:
            raise ValueError(f"policy.base reads cameras {cams}: add env.camera.enabled=true "
                             f"env.camera.cameras=[{','.join(cams)}]")  # fmt: skip
        self.env, self.base, self.spec, self.rcfg = env, base, spec, cfg
        self.instruction = cfg.instruction or TASK
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.max_episode_length, self.device, self.cfg = env.max_episode_length, env.device, env.cfg
        self.action_clip = float(env.cfg.action_clip)
        self.ramp_steps = int(cfg.alpha_ramp_iterations) * int(steps_per_iteration)
        self.env_steps = 0
        """Env steps taken so far (α's ramp reads it)."""
        if cfg.n_action_steps is not None:
            base.n_action_steps = int(cfg.n_action_steps)
        if cfg.temporal_ensemble is not None:
            base.temporal_ensemble_coeff = float(cfg.temporal_ensemble)
        self._order = list(env.cfg.camera.cameras)
        self.base.reset()
        self.base_action = torch.zeros(self.num_envs, self.num_actions, device=self.device)
        """(N, A) the base's action for the current step, in [-1, 1]."""
        self._query_base(env.get_observations())

    # ------------------------------------------------------------------ α and the base
    @property
    def alpha(self) -> float:
        """α now: ``alpha_start`` rising linearly to ``alpha`` over the ramp, then ``alpha``."""
        hi = float(self.rcfg.alpha)
        lo = hi if self.rcfg.alpha_start is None else float(self.rcfg.alpha_start)
        if self.ramp_steps <= 0:
            return hi
        return lo + (hi - lo) * min(1.0, self.env_steps / self.ramp_steps)

    def _query_base(self, obs: TensorDict) -> None:
        from upright.vla.evaluate_lift import make_batch

        batch = make_batch(self.env, obs, self.spec, self.instruction, self._order)
        with torch.no_grad():
            a = self.base.select_action(batch)
        self.base_action = a.to(self.device, torch.float32).clamp(-self.action_clip, self.action_clip)

    def _augment(self, obs: TensorDict) -> TensorDict:
        groups = {k: obs[k] for k in obs.keys()}
        for k in ("actor", "critic"):
            groups[k] = torch.cat([obs[k], self.base_action.to(obs[k].dtype)], dim=-1)
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def combine(self, residual: torch.Tensor) -> torch.Tensor:
        """(N, A) env action ``clip(a_base + α · clip(a_res, -1, 1), ±action_clip)`` for residuals (N, A)."""
        r = residual.to(self.device, torch.float32).clamp(-1.0, 1.0)
        return (self.base_action + self.alpha * r).clamp(-self.action_clip, self.action_clip)

    # ------------------------------------------------------------------ VecEnv
    @property
    def episode_length_buf(self) -> torch.Tensor:
        """The env's (N,) episode step counters."""
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    def get_observations(self) -> TensorDict:
        """The env's observations with the base action appended to ``actor`` and ``critic``."""
        return self._augment(self.env.get_observations())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step the env with ``combine(actions)``; reset the base's chunk queue of finished episodes and query the base
        for the next step. Logs ``Residual/alpha`` and ``Residual/abs_residual`` (mean |α a_res|)."""
        residual = actions.to(self.device, torch.float32).clamp(-1.0, 1.0)
        alpha = self.alpha
        obs, rew, dones, extras = self.env.step(self.combine(residual))
        self.env_steps += 1
        done_ids = dones.nonzero(as_tuple=False).flatten()
        if done_ids.numel() > 0:
            self.base.reset(done_ids.cpu())
        self._query_base(obs)
        log = extras.setdefault("episode", {})
        log["Residual/alpha"] = torch.tensor(alpha)
        log["Residual/abs_residual"] = (alpha * residual).abs().mean()
        return self._augment(obs), rew, dones, extras

    def reset_all(self) -> None:
        """Start a new episode everywhere (base queues cleared)."""
        self.env.reset_all()
        self.base.reset()
        self._query_base(self.env.get_observations())

    def state_dict(self) -> dict:
        """The env's state plus the env-step count (α's ramp)."""
        return {"env": self.env.state_dict(), "env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        if "env" in state:
            self.env.load_state_dict(state["env"])
            self.env_steps = int(state.get("env_steps", 0))
        else:  # a checkpoint of the bare env
            self.env.load_state_dict(state)

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    def __getattr__(self, name: str):
        # everything else (state, sim, reward_group_names, ...) is the env's
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


def residual_metadata(env_metadata: dict, base_file: pathlib.Path, base_sha256: str, cfg: ResidualCfg,
                      action_dim: int) -> dict:
    """The residual policy's ONNX metadata: the env's, with the base action appended to the observation and the
    residual's keys (``policy_type`` ``"residual"``, ``residual_base_file``, ``residual_base_sha256``,
    ``residual_alpha``, ``residual_formula``, ``residual_instruction``)."""
    from upright.tasks.lift.record_demos import TASK

    meta = dict(env_metadata)
    meta["observation_dim"] = int(env_metadata["observation_dim"]) + action_dim
    meta["observation_suffix"] = [BASE_ACTION_TERM, action_dim]
    meta["observation_suffix_description"] = ("after the env observation: the base policy's action of this step "
                                              "(dimensionless, [-1, 1], lift delta convention)")  # fmt: skip
    meta["policy_type"] = "residual"
    meta["residual_base_file"] = base_file.name
    meta["residual_base_sha256"] = base_sha256
    meta["residual_alpha"] = float(cfg.alpha)
    meta["residual_formula"] = "action = clip(base_action + residual_alpha * clip(output, -1, 1), -action_clip, action_clip)"
    meta["residual_instruction"] = cfg.instruction or TASK
    return meta


def setup_residual(env, cfg: ResidualCfg, run_dir: pathlib.Path, steps_per_iteration: int) -> tuple[ResidualEnv, dict]:
    """Load the base, copy its file into ``run_dir`` (``base_policy.onnx`` / ``base_model.pt``), record its checksums
    in ``run_dir/base_checksum.json`` and wrap ``env``. Returns the wrapped env and the residual metadata keys.

    Raises:
        FileNotFoundError: no base at ``cfg.base``.
        ValueError: the base file does not match the run's copy of it (a resumed run given another base), or the
            base cannot drive this env (:class:`ResidualEnv`).
    """
    from upright.vla.evaluate_lift import load_chunk_policy

    src = resolve_base_file(cfg.base)
    dst = run_dir / ("base_policy.onnx" if src.suffix == ".onnx" else "base_model.pt")
    sha = file_sha256(src)
    record_path = run_dir / "base_checksum.json"
    if record_path.is_file():  # resuming: the base must be the one the residual was trained on
        record = json.loads(record_path.read_text())
        if record["file_sha256"] != sha:
            raise ValueError(f"policy.base={cfg.base} is not the base this run was trained on (SHA-256 "
                             f"{sha[:12]} != {record['file_sha256'][:12]}); resume with the same base")  # fmt: skip
    elif src.resolve() != dst.resolve():
        shutil.copyfile(src, dst)
    base, spec = load_chunk_policy(dst if dst.is_file() else src)
    if src.suffix != ".onnx":  # a TinyVLA checkpoint next to its exported graph: keep the graph for deployment
        onnx_src = src.parent / "policy.onnx"
        if onnx_src.is_file() and not (run_dir / "base_policy.onnx").exists():
            shutil.copyfile(onnx_src, run_dir / "base_policy.onnx")
    if hasattr(base, "eval"):
        base.eval()
    for p in getattr(base, "parameters", lambda: [])():
        p.requires_grad_(False)
    if not record_path.is_file():
        record = {"base": str(cfg.base), "file_sha256": sha, "parameters_sha256_start": parameters_sha256(base)}
        record_path.write_text(json.dumps(record, indent=1) + "\n")
    wrapped = ResidualEnv(env, base, spec, cfg, steps_per_iteration)
    return wrapped, {"base_file": dst.name, "base_sha256": sha}


def finish_residual(env: ResidualEnv, run_dir: pathlib.Path) -> dict:
    """Record the base's checksums after training in ``base_checksum.json`` and check them against the start.

    Raises:
        RuntimeError: the base's weights changed during training (they must stay frozen).
    """
    record_path = run_dir / "base_checksum.json"
    record = json.loads(record_path.read_text())
    record["parameters_sha256_end"] = parameters_sha256(env.base)
    record["file_sha256_end"] = file_sha256(resolve_base_file(record["base"]))
    record["unchanged"] = (record["parameters_sha256_end"] == record["parameters_sha256_start"]
                           and record["file_sha256_end"] == record["file_sha256"])  # fmt: skip
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    if not record["unchanged"]:
        raise RuntimeError(f"the base policy's weights changed during residual training ({record_path})")
    return record


POLICY_OBS_KEY = "observation.policy_obs"
"""Batch key of the env's own observation (the lift task's 49 values), which the residual reads."""


class ResidualChunkPolicy(ChunkPolicy):
    """A trained residual and its base, run together from the run's files: ``select_action(batch)`` is
    ``clip(a_base + α · clip(π_res([obs, a_base]), -1, 1), ±action_clip)`` (module docstring).

    The batch holds the base's inputs (its ``observation.state``, images, ``task``) and
    ``observation.policy_obs`` (B, D) float32, the env observation the residual was trained on.

    Args:
        residual_onnx: the residual's ``policy.onnx`` (metadata ``policy_type`` ``"residual"``).
        base: the base policy (default: loaded from ``residual_base_file`` beside the residual file).
        check_checksum: refuse a base file whose SHA-256 differs from ``residual_base_sha256``.

    Raises:
        ValueError: the file is not a residual policy, or the base file is not the one it was trained on.
        FileNotFoundError: the base file is missing.
    """

    chunk_size = 1

    def __init__(self, residual_onnx: str | pathlib.Path, base: ChunkPolicy | None = None, check_checksum: bool = True):
        import onnxruntime as ort

        from upright.training.onnx_export import read_metadata
        from upright.vla.evaluate_lift import load_chunk_policy

        path = pathlib.Path(residual_onnx)
        meta = read_metadata(path)
        if meta.get("policy_type") != "residual":
            raise ValueError(f"{path} is not a residual policy (no policy_type=residual in its metadata); train one "
                             "with python train.py task=lift policy.base=<base>")  # fmt: skip
        base_file = path.parent / meta["residual_base_file"]
        if base is None:
            if not base_file.is_file():
                raise FileNotFoundError(f"residual policy {path}: its base {base_file.name} is missing beside it")
            if check_checksum and file_sha256(base_file) != meta["residual_base_sha256"]:
                raise ValueError(f"{base_file} is not the base {path.name} was trained on (SHA-256 differs)")
            base, self.base_spec = load_chunk_policy(base_file)
        else:
            self.base_spec = {}
        self.base, self.metadata = base, meta
        self.alpha, self.action_clip = float(meta["residual_alpha"]), float(meta["action_clip"])
        self.action_dim = int(base.action_dim)
        self.action_convention = "delta"
        self.instruction = meta.get("residual_instruction")
        self._session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self._input = meta["input_name"]

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Forget the base's queued actions of ``env_ids`` (all when None)."""
        self.base.reset(env_ids)

    def residual(self, policy_obs: torch.Tensor, base_action: torch.Tensor) -> torch.Tensor:
        """(B, A) residual π_res([obs, a_base]) in [-1, 1], one env at a time (the graph's batch size is 1)."""
        x = torch.cat([policy_obs.float().cpu(), base_action.float().cpu()], dim=-1).numpy()
        out = [self._session.run(None, {self._input: x[i : i + 1]})[0][0] for i in range(x.shape[0])]
        return torch.from_numpy(np.stack(out)).clamp(-1.0, 1.0)

    def select_action(self, batch) -> torch.Tensor:
        """(B, A) float32 combined action (class docstring).

        Raises:
            ValueError: the batch lacks ``observation.policy_obs``.
        """
        if POLICY_OBS_KEY not in batch:
            raise ValueError(f"a residual policy needs '{POLICY_OBS_KEY}' (the env observation) in the batch")
        a_base = self.base.select_action(batch).float().cpu().clamp(-self.action_clip, self.action_clip)
        r = self.residual(batch[POLICY_OBS_KEY], a_base)
        return (a_base + self.alpha * r).clamp(-self.action_clip, self.action_clip)

    def predict_action_chunk(self, batch) -> torch.Tensor:
        """(B, 1, A): the combined action of this step (the base's queue advances)."""
        return self.select_action(batch).unsqueeze(1)
