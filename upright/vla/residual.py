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
:class:`~upright.vla.residual_env.ResidualEnv`; the run directory then also holds ``base_policy.onnx`` (or the base's
checkpoint file), ``base_checksum.json`` (SHA-256 of the base's weights at the start and at the end of training) and
``policy.onnx``, the residual graph (dynamic batch) whose metadata names the base file, its checksum and α
(:func:`~upright.vla.residual_setup.residual_metadata`; :mod:`upright.vla.residual_setup` sets a run up and checks
its base at the end). :class:`ResidualChunkPolicy` runs the pair from those two files.

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

import numpy as np
import torch

from upright.policy_io.registry import onnx_kind, register_loader
from upright.policy_io.residual_base import is_remote_base, resolve_base_file
from upright.vla.checksums import file_sha256, metadata_sha256, parameters_sha256
from upright.vla.policy import ChunkPolicy

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
