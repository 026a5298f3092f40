"""Learning from interventions: fine-tune a base VLA on LeRobot v3 datasets that carry the deploy daemon's
``intervention`` / ``control_source`` columns (from the daemon, or from sim with a simulated operator).

Sample weights (:func:`sample_weights`), after Sirius (Liu et al., "Robot Learning on the Job: Human-in-the-Loop
Autonomy and Learning During Deployment", RSS 2023, section IV-B: human interventions up-weighted, the robot's
steps just before an intervention down-weighted, the rest of the robot's autonomous data kept):

- ``bc``: every frame weight 1 (plain behaviour cloning on the mixed data);
- ``intervention``: human frames ``intervention_weight``, every other frame 1;
- ``sirius``: human frames ``intervention_weight``; the ``pre_intervention_steps`` robot frames before each
  intervention starts ``pre_intervention_weight``; the other robot frames 1 in episodes that succeeded (the
  autonomous successes Sirius keeps) and ``failure_weight`` in episodes that did not. Sirius' operator makes every
  deployment episode succeed, so its data hold no autonomous failures; an operator that hands back and lets the
  policy fail (``sim_operator --hand-back-height``) records some, and cloning them copies the base's own mistakes
  (``docs/vla_residual.md``, session 11). Without outcomes (``success=None``) every episode counts as a success.

The weight values are upright's defaults (``WeightingCfg``), not Sirius's tuned numbers. Frames are drawn with
probability proportional to their weight (as Sirius' weighted sampling).

Fine-tuning (:func:`finetune`) is either full (every parameter) or LoRA through ``peft`` on the action head's linear
layers (``head.0``, ``head.2``, ``head.4``): only the adapter matrices train; :func:`merge_lora` folds them back
into a plain :class:`~upright.vla.tiny.TinyVLA` for export.

    python -m upright.vla.finetune --base runs/tiny_vla --dataset interventions --weighting sirius --lora-rank 8
        --out runs/ft
"""

from __future__ import annotations

import pathlib
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from upright.vla.dataset import BCData, chunk_targets
from upright.vla.tiny import TinyVLA

WEIGHTINGS = ("bc", "intervention", "sirius")
"""Sample-weighting schemes (module docstring)."""

LORA_TARGETS = ("head.0", "head.2", "head.4")
"""TinyVLA modules LoRA adapts: the three linear layers of the action head."""


@dataclass
class WeightingCfg:
    """Weights of :func:`sample_weights` (upright's defaults)."""

    intervention_weight: float = 2.0
    """Weight of a human (intervention) frame."""
    pre_intervention_steps: int = 15
    """Robot frames before an intervention that count as pre-intervention (0.3 s at 50 Hz)."""
    pre_intervention_weight: float = 0.1
    """Weight of a pre-intervention frame under ``sirius``."""
    failure_weight: float = 0.0
    """Weight under ``sirius`` of a robot frame (not pre-intervention) in an episode whose outcome is not
    ``success``."""


def load_intervention_flags(root: str | pathlib.Path, max_episodes: int | None = None) -> torch.Tensor:
    """(N,) bool ``intervention`` column of a LeRobot v3 dataset, in the frame order of
    :func:`upright.vla.dataset.load_dataset` (sorted by ``index``, same episode filter).

    Raises:
        ValueError: the dataset has no ``intervention`` column (record it with the daemon's schema:
            ``record_demos`` or the deploy daemon's logger).
    """
    root = pathlib.Path(root)
    for f in sorted(root.glob("data/chunk-*/file-*.parquet")):
        if "intervention" not in pq.read_schema(f).names:
            raise ValueError(
                f"dataset {root} has no 'intervention' column; record it with the daemon's schema "
                "(python -m upright.training.record_demos or the deploy daemon)"
            )
    table = _frame_table(root, ["intervention"], max_episodes)
    return torch.from_numpy(table.column("intervention").to_numpy(zero_copy_only=False).astype(bool))


def _frame_table(root: pathlib.Path, columns: list[str], max_episodes: int | None) -> pa.Table:
    """``index``, ``episode_index`` and ``columns`` of every frame of a LeRobot v3 dataset, sorted by ``index``, the
    episodes below ``max_episodes`` only (the frame order and filter of :func:`upright.vla.dataset.load_dataset`)."""
    tables = []
    for f in sorted(root.glob("data/chunk-*/file-*.parquet")):
        t = pq.read_table(f, columns=["index", "episode_index", *columns])
        if max_episodes is not None:
            t = t.filter(pc.less(t.column("episode_index"), max_episodes))
        if t.num_rows:
            tables.append(t)
    return pa.concat_tables(tables).sort_by("index")


def load_episode_success(root: str | pathlib.Path, max_episodes: int | None = None) -> torch.Tensor:
    """(N,) bool per frame: the frame's episode has ``upright/outcome`` ``success`` (the episodes table of a LeRobot v3
    dataset written by :class:`upright.dataset_io.lerobot.LeRobotV3Writer`), in the frame order of
    :func:`load_intervention_flags`.

    Raises:
        ValueError: the dataset has no ``upright/outcome`` episode column (record it with the daemon's writer).
    """
    root = pathlib.Path(root)
    outcome = {}
    for f in sorted(root.glob("meta/episodes/chunk-*/file-*.parquet")):
        t = pq.read_table(f)
        if "upright/outcome" not in t.column_names:
            raise ValueError(
                f"dataset {root} has no 'upright/outcome' episode column; record it with the daemon's "
                "writer (python -m upright.training.record_demos, the deploy daemon or sim_operator)"
            )
        outcome.update(zip(t.column("episode_index").to_pylist(), t.column("upright/outcome").to_pylist()))
    episodes = _frame_table(root, [], max_episodes).column("episode_index").to_pylist()
    return torch.tensor([outcome.get(e) == "success" for e in episodes], dtype=torch.bool)


def sample_weights(
    intervention: torch.Tensor,
    episode: torch.Tensor,
    scheme: str,
    cfg: WeightingCfg | None = None,
    success: torch.Tensor | None = None,
) -> torch.Tensor:
    """(N,) float32 sample weight of each frame (module docstring).

    Args:
        intervention: (N,) bool, the frame was under human control.
        episode: (N,) int64 episode of each frame; an episode's frames are consecutive and in time order.
        scheme: one of :data:`WEIGHTINGS`.
        success: (N,) bool, the frame's episode succeeded (:func:`load_episode_success`); None: every episode did.
            Only ``sirius`` reads it.

    Raises:
        ValueError: an unknown scheme, or shapes that differ.
    """
    cfg = cfg or WeightingCfg()
    if scheme not in WEIGHTINGS:
        raise ValueError(f"unknown weighting '{scheme}'; choose one of {', '.join(WEIGHTINGS)}")
    if (
        intervention.shape != episode.shape
        or intervention.ndim != 1
        or (success is not None and success.shape != episode.shape)
    ):
        raise ValueError(
            f"intervention and episode must both be (N,), got {tuple(intervention.shape)}, {tuple(episode.shape)}"
        )
    human = intervention.bool()
    w = torch.ones(human.shape[0], dtype=torch.float32)
    if scheme == "bc":
        return w
    w[human] = cfg.intervention_weight
    if scheme == "intervention":
        return w
    if success is not None:
        w[~human & ~success.bool()] = cfg.failure_weight  # autonomous frames of failed episodes
    # pre-intervention: robot frames within K steps before a frame where human control starts, same episode
    n = human.shape[0]
    prev_human = torch.zeros_like(human)
    prev_human[1:] = human[:-1] & (episode[1:] == episode[:-1])
    starts = (human & ~prev_human).nonzero().flatten()
    for s in starts.tolist():
        lo = max(0, s - cfg.pre_intervention_steps)
        for t in range(lo, s):
            if episode[t] == episode[s] and not human[t]:
                w[t] = cfg.pre_intervention_weight
    assert w.shape == (n,)
    return w


def add_lora(model: TinyVLA, rank: int = 8, alpha: float | None = None):
    """Wrap ``model`` with LoRA adapters (``peft``) on :data:`LORA_TARGETS`; every other parameter is frozen.

    Raises:
        ImportError: peft is not installed (``pip install peft``).
        ValueError: rank < 1.
    """
    if rank < 1:
        raise ValueError(f"LoRA rank must be >= 1, got {rank}")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as err:
        raise ImportError("LoRA fine-tuning needs peft: pip install peft") from err
    cfg = LoraConfig(
        r=rank,
        lora_alpha=alpha if alpha is not None else 2 * rank,
        target_modules=list(LORA_TARGETS),
        lora_dropout=0.0,
        bias="none",
    )
    return get_peft_model(model, cfg)


def merge_lora(peft_model) -> TinyVLA:
    """The TinyVLA with the adapters folded into its weights (peft ``merge_and_unload``), in eval mode."""
    model = peft_model.merge_and_unload()
    return model.eval()


def _core(model) -> TinyVLA:
    """The TinyVLA inside a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


LR_SCHEDULES = ("constant", "cosine")
"""Learning-rate schedules of :func:`finetune`: ``constant`` (the rate ``lr`` throughout) or ``cosine`` (from ``lr``
to 0 over the steps, half a cosine: Loshchilov and Hutter, "SGDR", ICLR 2017; ``torch.optim.lr_scheduler.
CosineAnnealingLR``)."""


def finetune(
    model,
    data: BCData,
    weights: torch.Tensor,
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 3e-4,
    seed: int = 0,
    log=print,
    lr_schedule: str = "constant",
) -> list[float]:
    """Fine-tune ``model`` (a TinyVLA, or one wrapped by :func:`add_lora`) on ``data`` with frames drawn in
    proportion to ``weights`` (N,); the loss is train_bc's (L1 on valid chunk entries, normalised units, the base's
    normalisation kept). Only parameters with ``requires_grad`` train, with AdamW at ``lr`` under ``lr_schedule``
    (:data:`LR_SCHEDULES`). Returns the loss of every step.

    Raises:
        ValueError: weights of the wrong shape, all zero, or negative; a dataset with cameras the model lacks; an
            unknown ``lr_schedule``.
    """
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}")
    from upright.vla.train_bc import bc_step

    core = _core(model)
    if weights.shape != (len(data),) or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"weights must be ({len(data)},) non-negative with a positive sum")
    missing = [c for c in core.cfg.cameras if c not in data.images]
    if missing:
        raise ValueError(f"the base reads cameras {missing} the dataset lacks; record them with --cameras")
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    targets, is_pad = chunk_targets(data.action, data.episode, core.chunk_size)
    targets = (targets - core.action_mean) / core.action_std
    valid = (~is_pad).float().unsqueeze(-1)
    ids, mask = core.tokenizer.encode(data.tasks)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if lr_schedule == "cosine" else None
    losses: list[float] = []
    start = time.monotonic()
    model.train()
    for step in range(1, steps + 1):
        idx = torch.multinomial(weights, batch_size, replacement=True, generator=g)
        images = [data.images[c][idx].float() / 255.0 for c in core.cfg.cameras]
        losses.append(bc_step(core, opt, data, idx, images, targets, valid, ids, mask))
        if sched is not None:
            sched.step()
        if step % max(1, steps // 10) == 0 or step == steps:
            log(
                f"finetune step {step:6d}  L1 {np.mean(losses[-max(1, steps // 10) :]):.4f}  "
                f"lr {opt.param_groups[0]['lr']:.3g}  ({time.monotonic() - start:.0f} s)"
            )
    model.eval()
    return losses
