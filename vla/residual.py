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
the residual graph (dynamic batch) whose metadata names the base file, its checksum and α
(:func:`residual_metadata`). :class:`ResidualChunkPolicy` runs the pair from those two files.

``policy.base=ws://HOST:PORT`` takes a policy server (openpi's protocol, :class:`~upright.vla.remote.RemotePolicy`:
the envs' requests are pipelined, and ``upright-policy-server`` answers them in batched calls). A remote base cannot
be checksummed by file: ``base_checksum.json`` and the residual's metadata record its URL and the SHA-256 of the
server's metadata (:func:`remote_base_sha256`; ``upright-policy-server``'s includes ``weights_sha256``, a hash of the
served weights), checked again at the end of training and whenever the pair is run. That the served weights stay
frozen is the server's responsibility: a server whose metadata does not change with its weights (openpi's) cannot be
checked from here.

Actions are the lift env's: dimensionless deltas of the position targets in [-1, 1] (``action_convention``
``"delta"``); a base with absolute actions is refused.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from upright.policy_io.registry import onnx_kind, register_loader
from upright.vla.checksums import file_sha256, metadata_sha256, parameters_sha256
from upright.vla.policy import ChunkPolicy
from upright.vla.residual_config import ResidualCfg, check_residual_cfg, is_remote_base, resolve_base_file

BASE_ACTION_TERM = "base_action"
"""Name of the observation term appended for the residual (the base's action of this step, (A,) in [-1, 1])."""

TRANSPORT_KEYS = ("max_batch",)
"""Server metadata keys left out of :func:`remote_base_sha256`: how requests are served, not what answers them."""

REMOTE_BASE_NOTE = (
    "a remote base cannot be checksummed by file: its URL and the SHA-256 of its server's metadata "
    "are recorded; that the served weights stay frozen is the server's responsibility"
)


def remote_base_sha256(metadata: dict) -> str:
    """SHA-256 of a policy server's metadata (:func:`~upright.vla.checksums.metadata_sha256`) without the
    :data:`TRANSPORT_KEYS`: the record of a remote base (module docstring)."""
    return metadata_sha256({k: v for k, v in metadata.items() if k not in TRANSPORT_KEYS})


class ResidualEnv(VecEnv):
    """rsl-rl ``VecEnv`` over a lift env whose actions are residuals on a frozen base policy (module docstring).

    Observations: the env's groups, with ``actor`` and ``critic`` extended by the base's action of this step:
    (N, D + A) float32. Actions: (N, A) residuals in [-1, 1]; the env receives ``clip(a_base + α a_res)``.

    Args:
        env: the lift env (:class:`~upright.tasks.lift.env.LiftEnv`).
        base: the frozen base policy (``action_convention`` ``"delta"``, ``action_dim`` = the env's); a
            :class:`~upright.vla.remote.RemotePolicy` is asked, each step, only for the envs that need a new chunk.
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
            raise ValueError(
                "policy.base has absolute actions; the residual hook needs a base with delta actions "
                "(the lift env's convention): retrain it with upright.vla.train_bc"
            )
        if int(base.action_dim) != int(env.num_actions):
            raise ValueError(f"policy.base outputs {base.action_dim} actions, the env takes {env.num_actions}")
        cams = list(spec.get("cameras", []))
        if cams and not env.cfg.camera.enabled:
            raise ValueError(
                f"policy.base reads cameras {cams}: add env.camera.enabled=true env.camera.cameras=[{','.join(cams)}]"
            )
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
        """Close the env (and a remote base's connections)."""
        self.env.close()
        if hasattr(self.base, "close"):
            self.base.close()

    def __getattr__(self, name: str):
        # everything else (state, sim, reward_group_names, ...) is the env's
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


def residual_metadata(env_metadata: dict, base_info: dict, cfg: ResidualCfg, action_dim: int) -> dict:
    """The residual policy's ONNX metadata: the env's, with the base action appended to the observation and the
    residual's keys (``policy_type`` ``"residual"``, ``residual_alpha``, ``residual_formula``,
    ``residual_instruction``) and the base's record from :func:`setup_residual` (``base_info``): for a file base
    ``residual_base_file`` and ``residual_base_sha256`` (its bytes); for a remote base ``residual_base_url``,
    ``residual_base_metadata_sha256`` (:func:`remote_base_sha256`), ``residual_base_weights_sha256`` (when the server
    sends one) and ``residual_base_note``."""
    from upright.tasks.lift.record_demos import TASK

    meta = dict(env_metadata)
    meta["observation_dim"] = int(env_metadata["observation_dim"]) + action_dim
    meta["observation_suffix"] = [BASE_ACTION_TERM, action_dim]
    meta["observation_suffix_description"] = (
        "after the env observation: the base policy's action of this step "
        "(dimensionless, [-1, 1], lift delta convention)"
    )
    meta["policy_type"] = "residual"
    if "base_url" in base_info:
        meta["residual_base_url"] = base_info["base_url"]
        meta["residual_base_metadata_sha256"] = base_info["base_metadata_sha256"]
        if base_info.get("base_weights_sha256"):
            meta["residual_base_weights_sha256"] = base_info["base_weights_sha256"]
        meta["residual_base_note"] = REMOTE_BASE_NOTE
    else:
        meta["residual_base_file"] = base_info["base_file"]
        meta["residual_base_sha256"] = base_info["base_sha256"]
    meta["residual_alpha"] = float(cfg.alpha)
    meta["residual_formula"] = (
        "action = clip(base_action + residual_alpha * clip(output, -1, 1), -action_clip, action_clip)"
    )
    meta["residual_instruction"] = cfg.instruction or TASK
    return meta


def setup_residual(env, cfg: ResidualCfg, run_dir: pathlib.Path, steps_per_iteration: int) -> tuple[ResidualEnv, dict]:
    """Load the base, copy its file into ``run_dir`` (``base_policy.onnx`` / ``base_model.pt``), record its checksums
    in ``run_dir/base_checksum.json`` and wrap ``env``. Returns the wrapped env and the base's record for
    :func:`residual_metadata` (``base_file``, ``base_sha256``). A remote base (``ws://``) goes to
    :func:`_setup_remote` (no file; the server's metadata is the record).

    Raises:
        FileNotFoundError: no base at ``cfg.base``.
        ValueError: the base file does not match the run's copy of it (a resumed run given another base), or the
            base cannot drive this env (:class:`ResidualEnv`).
        ConnectionError: no policy server at a ``ws://`` base.
    """
    from upright.vla.evaluate_lift import load_chunk_policy

    if is_remote_base(cfg.base):
        return _setup_remote(env, cfg, run_dir, steps_per_iteration)
    src = resolve_base_file(cfg.base)
    dst = run_dir / ("base_policy.onnx" if src.suffix == ".onnx" else "base_model.pt")
    sha = file_sha256(src)
    record_path = run_dir / "base_checksum.json"
    if record_path.is_file():  # resuming: the base must be the one the residual was trained on
        record = json.loads(record_path.read_text())
        if record.get("file_sha256") != sha:
            was = str(record.get("file_sha256"))[:12]
            raise ValueError(
                f"policy.base={cfg.base} is not the base this run was trained on (SHA-256 "
                f"{sha[:12]} != {was}); resume with the same base"
            )
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


def _setup_remote(env, cfg: ResidualCfg, run_dir: pathlib.Path, steps_per_iteration: int) -> tuple[ResidualEnv, dict]:
    """:func:`setup_residual` for ``policy.base=ws://HOST:PORT``: connect, record the URL and the server's metadata
    and its :func:`remote_base_sha256` in ``base_checksum.json`` (``remote``: true), wrap ``env``. Returns
    ``base_url``, ``base_metadata_sha256`` and ``base_weights_sha256`` (None when the server sends none).

    Raises:
        ConnectionError: no server at the address.
        ValueError: a resumed run whose record names another server metadata, or a base that cannot drive this env.
    """
    from upright.vla.checksums import jsonable
    from upright.vla.evaluate_lift import load_chunk_policy

    base, spec = load_chunk_policy(cfg.base)
    sha = remote_base_sha256(base.metadata)
    record_path = run_dir / "base_checksum.json"
    try:
        if record_path.is_file():  # resuming: the server must serve the policy the residual was trained on
            record = json.loads(record_path.read_text())
            if record.get("server_metadata_sha256") != sha:
                raise ValueError(
                    f"policy.base={cfg.base} serves another policy than this run was trained on (server "
                    f"metadata SHA-256 {sha[:12]} != {str(record.get('server_metadata_sha256'))[:12]}); "
                    "resume with the same server and policy"
                )
        else:
            record = {
                "base": cfg.base,
                "remote": True,
                "server_metadata": jsonable(base.metadata),
                "server_metadata_sha256": sha,
                "weights_sha256_start": base.metadata.get("weights_sha256"),
                "note": REMOTE_BASE_NOTE,
            }
            record_path.write_text(json.dumps(record, indent=1) + "\n")
        wrapped = ResidualEnv(env, base, spec, cfg, steps_per_iteration)
    except Exception:
        base.close()
        raise
    return wrapped, {
        "base_url": cfg.base,
        "base_metadata_sha256": sha,
        "base_weights_sha256": base.metadata.get("weights_sha256"),
    }


def finish_residual(env: ResidualEnv, run_dir: pathlib.Path) -> dict:
    """Record the base's checksums after training in ``base_checksum.json`` and check them against the start. A
    remote base: its server's metadata is fetched again (a new connection) and hashed; a server that no longer answers
    is recorded as unchecked (``unchanged``: null) rather than raised, so that it does not hide the error that ended
    training.

    Raises:
        RuntimeError: the base's weights (or a remote base's server metadata) changed during training (they must
            stay frozen).
    """
    record_path = run_dir / "base_checksum.json"
    record = json.loads(record_path.read_text())
    if record.get("remote"):
        from upright.vla.remote import fetch_metadata

        try:
            meta = fetch_metadata(record["base"])
        except (ConnectionError, ValueError) as e:
            record["server_metadata_sha256_end"], record["unchanged"] = None, None
            record["unchecked_reason"] = str(e)
        else:
            record["server_metadata_sha256_end"] = remote_base_sha256(meta)
            record["weights_sha256_end"] = meta.get("weights_sha256")
            record["unchanged"] = record["server_metadata_sha256_end"] == record["server_metadata_sha256"]
        record_path.write_text(json.dumps(record, indent=1) + "\n")
        if record["unchanged"] is False:
            raise RuntimeError(f"the remote base's server metadata changed during residual training ({record_path})")
        return record
    record["parameters_sha256_end"] = parameters_sha256(env.base)
    record["file_sha256_end"] = file_sha256(resolve_base_file(record["base"]))
    record["unchanged"] = (
        record["parameters_sha256_end"] == record["parameters_sha256_start"]
        and record["file_sha256_end"] == record["file_sha256"]
    )
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    if not record["unchanged"]:
        raise RuntimeError(f"the base policy's weights changed during residual training ({record_path})")
    return record


def describe_record(record: dict) -> str:
    """One line on a ``base_checksum.json`` record after :func:`finish_residual` (train.py prints it)."""
    if record.get("remote"):
        if record.get("unchanged") is None:
            return (
                f"Remote base {record['base']} NOT checked at the end ({record.get('unchecked_reason')}); "
                f"{REMOTE_BASE_NOTE}"
            )
        return (
            f"Base policy unchanged: server {record['base']} metadata SHA-256 "
            f"{record['server_metadata_sha256'][:16]}... (weights {str(record.get('weights_sha256_end'))[:16]}...;"
            f" {REMOTE_BASE_NOTE})"
        )
    return (
        f"Base policy unchanged: file SHA-256 {record['file_sha256'][:16]}..., parameters "
        f"{str(record['parameters_sha256_end'])[:16]}..."
    )


POLICY_OBS_KEY = "observation.policy_obs"
"""Batch key of the env's own observation (the lift task's 49 values), which the residual reads."""


class ResidualChunkPolicy(ChunkPolicy):
    """A trained residual and its base, run together from the run's files: ``select_action(batch)`` is
    ``clip(a_base + α · clip(π_res([obs, a_base]), -1, 1), ±action_clip)`` (module docstring).

    The batch holds the base's inputs (its ``observation.state``, images, ``task``) and
    ``observation.policy_obs`` (B, D) float32, the env observation the residual was trained on.

    Args:
        residual_onnx: the residual's ``policy.onnx`` (metadata ``policy_type`` ``"residual"``).
        base: the base policy: None (the recorded one: ``residual_base_file`` beside the residual file, or the server
            at ``residual_base_url``), a :class:`~upright.vla.policy.ChunkPolicy` (used as given, unchecked), or a
            file, folder or ``ws://HOST:PORT`` to load it from instead (e.g. the run's base served on a GPU machine).
        check_checksum: refuse a base the record cannot vouch for (:meth:`_check_base`).

    Attributes:
        batched: whether the residual graph takes the whole batch in one call (a dynamic batch axis; residual files
            exported before it have batch 1 and run one row at a time).

    Raises:
        ValueError: the file is not a residual policy, or the base is not the one it was trained on.
        FileNotFoundError: the base file is missing.
        ConnectionError: a remote base's server does not answer.
    """

    chunk_size = 1

    def __init__(
        self,
        residual_onnx: str | pathlib.Path,
        base: ChunkPolicy | str | pathlib.Path | None = None,
        check_checksum: bool = True,
    ):
        from upright.policy_io.schema import read_metadata
        from upright.policy_io.session import open_session
        from upright.training.onnx_export import onnx_batch_is_dynamic
        from upright.vla.evaluate_lift import load_chunk_policy

        path = pathlib.Path(residual_onnx)
        meta = read_metadata(path)
        if meta.get("policy_type") != "residual":
            raise ValueError(
                f"{path} is not a residual policy (no policy_type=residual in its metadata); train one "
                "with python train.py task=lift policy.base=<base>"
            )
        self.path, self.metadata = path, meta
        self.base_spec = {}
        if base is None and "residual_base_url" in meta:
            base = meta["residual_base_url"]
        elif base is None:
            base = path.parent / meta["residual_base_file"]
            if not base.is_file():
                raise FileNotFoundError(f"residual policy {path}: its base {base.name} is missing beside it")
        if not isinstance(base, ChunkPolicy):
            source = str(base)
            if check_checksum and not is_remote_base(source):
                self._check_base_file(resolve_base_file(source, label="base"))
            base, self.base_spec = load_chunk_policy(source)
            if check_checksum and is_remote_base(source):
                try:
                    self._check_remote_base(base)
                except ValueError:
                    base.close()
                    raise
        self.base = base
        self.alpha, self.action_clip = float(meta["residual_alpha"]), float(meta["action_clip"])
        self.action_dim = int(base.action_dim)
        self.action_convention = "delta"
        self.instruction = meta.get("residual_instruction")
        self._session = open_session(path, threads=None)
        self._input = meta["input_name"]
        self.batched = onnx_batch_is_dynamic(self._session)

    def _record(self) -> dict:
        """The run's ``base_checksum.json`` beside the residual file ({} when absent, e.g. a copied ``.onnx``)."""
        record_path = self.path.parent / "base_checksum.json"
        return json.loads(record_path.read_text()) if record_path.is_file() else {}

    def _check_base_file(self, base_file: pathlib.Path) -> None:
        """A file base must have the recorded bytes (``residual_base_sha256``); a residual trained on a remote base
        can run with a local file only when its parameters hash to the weights the server announced.

        Raises:
            ValueError: a base the record does not vouch for (one line naming the way out).
        """
        meta = self.metadata
        if "residual_base_sha256" in meta:
            if file_sha256(base_file) != meta["residual_base_sha256"]:
                raise ValueError(f"{base_file} is not the base {self.path.name} was trained on (SHA-256 differs)")
            return
        from upright.vla.evaluate_lift import load_chunk_policy

        weights = meta.get("residual_base_weights_sha256")
        policy, _ = load_chunk_policy(base_file)
        if weights is None or weights not in (parameters_sha256(policy), file_sha256(base_file)):
            raise ValueError(
                f"{base_file} is not the base {self.path.name} was trained on (trained with the server "
                f"{meta.get('residual_base_url')}, whose weights hash {str(weights)[:12]} does not "
                "match); pass check_checksum=False (--no-base-check) to run it anyway"
            )

    def _check_remote_base(self, base) -> None:
        """A remote base must serve what the record says: the same server metadata (a residual trained on a server),
        or weights whose hash (``weights_sha256`` in the server's metadata) is the trained-on file's or parameters'
        (a residual trained on a file, its base now served).

        Raises:
            ValueError: the server's metadata or weights differ from the record's (one line naming the way out).
        """
        meta, served = self.metadata, base.metadata
        if "residual_base_metadata_sha256" in meta:
            ok = remote_base_sha256(served) == meta["residual_base_metadata_sha256"]
            what = "its metadata SHA-256 differs from residual_base_metadata_sha256"
        else:
            known = {meta.get("residual_base_sha256"), self._record().get("parameters_sha256_start")} - {None}
            ok = served.get("weights_sha256") in known
            what = (
                f"its weights_sha256 {str(served.get('weights_sha256'))[:12]} is neither the base file's nor its "
                "parameters' recorded hash"
            )
        if not ok:
            raise ValueError(
                f"the server at {base.url} does not serve the base {self.path.name} was trained on "
                f"({what}); serve that policy, or pass check_checksum=False (--no-base-check)"
            )

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Forget the base's queued actions of ``env_ids`` (all when None)."""
        self.base.reset(env_ids)

    def residual(self, policy_obs: torch.Tensor, base_action: torch.Tensor) -> torch.Tensor:
        """(B, A) float32 residual π_res([obs, a_base]) in [-1, 1] for ``policy_obs`` (B, D) and ``base_action``
        (B, A): one onnxruntime call for the whole batch when the graph's batch axis is dynamic (:attr:`batched`),
        else one call per row (a residual file exported with batch 1); row i answers row i either way."""
        x = torch.cat([policy_obs.float().cpu(), base_action.float().cpu()], dim=-1).numpy()
        if self.batched:
            out = self._session.run(None, {self._input: x})[0]
        else:
            out = np.stack([self._session.run(None, {self._input: x[i : i + 1]})[0][0] for i in range(x.shape[0])])
        return torch.from_numpy(np.asarray(out, dtype=np.float32)).clamp(-1.0, 1.0)

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

    def close(self) -> None:
        """Close a remote base's connections (nothing for a local base)."""
        if hasattr(self.base, "close"):
            self.base.close()


def _is_residual_source(spec: str) -> bool:
    """A residual run folder (``base_checksum.json`` beside its ``policy.onnx``) or an ``.onnx`` file whose metadata
    says ``policy_type`` = ``residual``."""
    path = pathlib.Path(spec)
    onnx_file = path / "policy.onnx" if path.is_dir() and (path / "base_checksum.json").is_file() else path
    return onnx_file.suffix == ".onnx" and onnx_file.is_file() and onnx_kind(onnx_file) == "residual"


def load_residual(spec: str, base=None, check_checksum: bool = True) -> ResidualChunkPolicy:
    """The residual pair of a run folder or its ``policy.onnx`` (kind ``"residual"`` of
    :mod:`upright.policy_io.registry`); ``base`` and ``check_checksum`` as :class:`ResidualChunkPolicy`'s.

    Raises:
        FileNotFoundError, ValueError, ConnectionError: as :class:`ResidualChunkPolicy`.
    """
    path = pathlib.Path(spec)
    return ResidualChunkPolicy(
        path / "policy.onnx" if path.is_dir() else path, base=base, check_checksum=check_checksum
    )


register_loader("residual", _is_residual_source, load_residual, kind="residual")
