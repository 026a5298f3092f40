"""``policy.*`` settings of ``train.py``: residual RL on a frozen base policy (:mod:`upright.vla.residual`), and where
that base comes from (a weight file or folder, or an openpi-protocol server at ``ws://HOST:PORT``).

Standard library only, on the ground floor: the Hydra config (:mod:`upright.conf`), the residual hook and the VLA
loaders that the deploy daemon imports all read it, and none of them may pull in the others' dependencies.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass


@dataclass
class ResidualCfg:
    """``policy.*``: residual RL on a frozen base policy (module docstring). Off while ``base`` is None."""

    base: str | None = None
    """The base policy: a folder with ``model.pt`` or ``policy.onnx`` (``python -m upright.vla.train_bc``), or the
    file, or ``ws://HOST:PORT``, an openpi-protocol policy server (:class:`~upright.vla.remote.RemotePolicy`; its
    metadata must name the policy's ``state_key``, as ``upright-policy-server``'s does). None: train a policy from
    scratch (no residual)."""
    alpha: float = 0.3
    """Residual scale α in (0, 1]: the residual moves each action by at most α (actions are in [-1, 1])."""
    alpha_start: float | None = None
    """α at the first env step (None: ``alpha`` from the start); it rises linearly to ``alpha``."""
    alpha_ramp_iterations: int = 0
    """Training iterations over which α rises from ``alpha_start`` to ``alpha`` (0: no ramp)."""
    instruction: str | None = None
    """Instruction given to the base (None: the demonstrations' :data:`upright.tasks.lift.vla_io.TASK`)."""
    n_action_steps: int | None = None
    """Base chunk execution: actions run per chunk (None: the base's own setting, the whole chunk by default)."""
    temporal_ensemble: float | None = None
    """Base chunk execution: ACT's temporal ensembling coefficient m (None: queue mode)."""


def is_remote_base(base: str | pathlib.Path | None) -> bool:
    """Whether ``policy.base`` names a policy server (``ws://...``) rather than a file or folder."""
    return isinstance(base, str) and base.startswith(("ws://", "wss://"))


def check_residual_cfg(cfg: ResidualCfg, task_name: str) -> None:
    """Raise ValueError (one line naming the fix) for settings the residual hook cannot run."""
    if is_remote_base(cfg.base):
        parse_ws_url(cfg.base)  # ValueError naming the form
    if not 0.0 < float(cfg.alpha) <= 1.0:
        raise ValueError(f"policy.alpha must be in (0, 1] (the residual's largest share of an action), got {cfg.alpha}")
    if cfg.alpha_start is not None and not 0.0 <= float(cfg.alpha_start) <= float(cfg.alpha):
        raise ValueError(f"policy.alpha_start must be in [0, policy.alpha={cfg.alpha}], got {cfg.alpha_start}")
    if cfg.alpha_ramp_iterations < 0:
        raise ValueError(f"policy.alpha_ramp_iterations must be >= 0, got {cfg.alpha_ramp_iterations}")
    if task_name != "lift":
        raise ValueError(
            f"policy.base (residual RL on a VLA) supports task=lift only, got task={task_name}; drop policy.base"
        )


def resolve_base_file(base: str | pathlib.Path, label: str = "policy.base") -> pathlib.Path:
    """A VLA's weight file: ``model.pt`` (preferred) or ``policy.onnx`` in a folder, or the file itself. ``label``
    names the setting in the error (``policy.base``, ``--policy``, ...).

    Raises:
        FileNotFoundError: nothing loadable (the message names train_bc).
    """
    path = pathlib.Path(base)
    if path.is_dir():
        for name in ("model.pt", "policy.onnx"):
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(
            f"{label}={base}: the folder has no model.pt or policy.onnx; train a base with "
            "python -m upright.vla.train_bc --dataset DIR --out DIR"
        )
    if not path.is_file():
        raise FileNotFoundError(
            f"{label}={base}: no such file or folder; train a base with "
            "python -m upright.vla.train_bc --dataset DIR --out DIR"
        )
    return path


def parse_ws_url(url: str, label: str = "policy.base") -> tuple[str, int]:
    """(host, port) of ``ws://HOST:PORT`` (a trailing ``/`` allowed; IPv6 hosts in brackets, ``ws://[::1]:8000``).
    ``label`` names the setting in the error.

    Raises:
        ValueError: anything else (``wss://`` included: RemotePolicy speaks plain websockets).
    """
    address = url[len("ws://") :].rstrip("/") if url.startswith("ws://") else ""
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or "/" in address:
        raise ValueError(f"{label}={url}: expected ws://HOST:PORT, e.g. ws://127.0.0.1:8000")
    return host, int(port)
