"""Train :class:`~upright.vla.tiny.TinyVLA` by behaviour cloning on LeRobot v3 datasets, then export it to ONNX.

    python -m upright.vla.train_bc --dataset data/lift_demos [--dataset DIR2 ...] --out runs/tiny_vla
        [--steps 3000] [--chunk-size 10] [--seed 0] [--batch-size 64] [--lr 3e-4] [--cameras front | --no-images]
        [--state-key observation.state | observation.policy_obs] [--max-episodes N] [--deploy-contract lift | FILE]

Datasets come from :mod:`upright.training.record_demos` (``--cameras`` for images, ``--paraphrases`` for several
instructions). The loss is the L1 distance between the predicted chunk and the next H actions of the same episode,
in normalised action units, over the valid (not padded) entries (ACT's loss); AdamW; images get a random shift of up
to ±4 px (DrQ's augmentation). Writes into ``--out``:

- ``model.pt``: ``{"config", "state_dict", "tasks", "losses"}`` (:meth:`TinyVLA.load` reads it);
- ``policy.onnx``: the graph with its metadata (:mod:`upright.vla.onnx_policy`), checked against torch;
- ``train_log.csv``: step, loss (mean over the last ``--log-every`` steps), seconds.

``--state-key observation.policy_obs`` trains on the lift task's 49-value observation (cube and target positions
included) instead of the proprioceptive ``observation.state``: a state-only policy that needs no camera.

``--deploy-contract lift`` (the lift task's, :func:`upright.tasks.lift.metadata.lift_deploy_contract`) or a JSON file
stores what the deploy daemon needs beside the VLA metadata (joints, Kp/Kd, default pose, action mode and scale;
:data:`upright.policy_io.schema.CHUNK_CONTRACT_KEYS`) in ``model.pt`` and ``policy.onnx``, so that
``upright-deploy run --policy`` runs either alone (``docs/deploy_chunked.md``).

Every ``--dataset`` is checked before any is read (:func:`~upright.dataset_io.check.check_dataset`): a damaged one
(``meta/info.json`` truncated, empty or without ``features``, a parquet file cut short, ``meta/tasks.parquet``
missing) or a path that is a file is one line naming the file, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from upright.dataset_io.check import check_dataset
from upright.vla.dataset import BCData, chunk_targets, concat, load_dataset
from upright.vla.policy import IMAGE_PREFIX, STATE_KEY
from upright.vla.tiny import TinyVLA, TinyVLAConfig


@dataclass
class TrainBCConfig:
    """Behaviour-cloning settings (the command line's options)."""

    steps: int = 3000
    batch_size: int = 64
    lr: float = 3e-4
    weight_decay: float = 1e-4
    chunk_size: int = 10
    seed: int = 0
    shift_px: int = 4
    """Random image shift (pad by this many px, replicate, random crop back); 0: off."""
    log_every: int = 100
    export: bool = True
    """Export and check ``policy.onnx`` after training."""


def bc_step(
    model,
    opt,
    data: BCData,
    idx: torch.Tensor,
    images: list[torch.Tensor],
    targets: torch.Tensor,
    valid: torch.Tensor,
    ids: torch.Tensor,
    mask: torch.Tensor,
) -> float:
    """One optimiser step of the BC loss on frames ``idx`` (B,): L1 between the predicted chunk and ``targets``
    (N, H, A, normalised units) over the valid entries (``valid`` (N, H, 1)); returns the loss.

    ``model`` is a TinyVLA (the parameters ``opt`` holds are the ones that train); ``images`` one (B, 3, H, W) float
    tensor per camera; ``ids``/``mask`` the tokenised task strings, indexed by ``data.task_id``.
    """
    t = data.task_id[idx]
    pred = model.normalized_chunk(data.state[idx], images, ids[t], mask[t])
    err = (pred - targets[idx]).abs() * valid[idx]
    loss = err.sum() / (valid[idx].sum() * model.action_dim).clamp_min(1.0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def random_shift(images: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """DrQ's augmentation: (B, C, H, W) padded by ``pad`` px (replicate) and cropped back at a random offset."""
    if pad <= 0:
        return images
    b, _, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
    rows = (dy.view(b, 1) + torch.arange(h).view(1, h)).view(b, 1, h, 1).expand(b, images.shape[1], h, w + 2 * pad)
    out = padded.gather(2, rows)
    cols = (dx.view(b, 1) + torch.arange(w).view(1, w)).view(b, 1, 1, w).expand(b, images.shape[1], h, w)
    return out.gather(3, cols)


def read_deploy_contract(source: str, data: BCData | None = None) -> dict:
    """The deploy contract ``source`` names: ``lift`` (:func:`upright.tasks.lift.metadata.lift_deploy_contract`,
    with the dataset's 1/fps as ``control_dt``) or a JSON file of
    :data:`~upright.policy_io.schema.CHUNK_CONTRACT_KEYS`.

    Raises:
        ValueError: an unknown name, a file that is not a JSON object, or joints that are not the dataset's actions.
    """
    import json

    if source == "lift":
        from upright.tasks.lift.metadata import lift_deploy_contract

        contract = lift_deploy_contract(control_dt=None if data is None else 1.0 / data.fps)
    else:
        path = pathlib.Path(source)
        if not path.is_file():
            raise ValueError(f"--deploy-contract {source!r} is neither 'lift' nor a JSON file")
        contract = json.loads(path.read_text())
        if not isinstance(contract, dict):
            raise ValueError(f"--deploy-contract {source}: expected a JSON object of the contract keys")
    joints = list(contract.get("joint_names", []))
    if data is not None and data.action_names and joints != list(data.action_names):
        raise ValueError(
            f"--deploy-contract {source}: joint_names {joints} are not the dataset's action names "
            f"{list(data.action_names)}"
        )
    return contract


def build_model(
    data: BCData, cfg: TrainBCConfig, state_key: str = STATE_KEY, deploy_contract: dict | None = None
) -> TinyVLA:
    """A TinyVLA sized for ``data`` (its cameras, image size, state and action dims) with its normalisation stats;
    ``deploy_contract`` (:func:`read_deploy_contract`) goes into ``cfg.extra["deploy_contract"]``."""
    cams = tuple(data.images)
    h, w = data.images[cams[0]].shape[2:] if cams else (64, 64)
    model = TinyVLA(
        TinyVLAConfig(
            cameras=cams,
            image_height=int(h),
            image_width=int(w),
            chunk_size=cfg.chunk_size,
            state_dim=data.state.shape[1],
            action_dim=data.action.shape[1],
            state_key=state_key,
            state_names=tuple(data.state_names),
            action_names=tuple(data.action_names),
            control_dt=1.0 / data.fps,
            extra={
                "datasets": data.sources,
                "frames": len(data),
                "episodes": data.num_episodes,
                "steps": cfg.steps,
                **({"deploy_contract": dict(deploy_contract)} if deploy_contract else {}),
            },
        )
    )
    model.set_stats(data.state, data.action)
    return model


def train(
    data: BCData,
    out: str | pathlib.Path | None,
    cfg: TrainBCConfig,
    state_key: str = STATE_KEY,
    log=print,
    deploy_contract: dict | None = None,
) -> tuple[TinyVLA, list[float]]:
    """Behaviour cloning of a new TinyVLA on ``data``; writes ``model.pt``, ``train_log.csv`` and (``cfg.export``)
    ``policy.onnx`` into ``out`` (nothing when ``out`` is None); ``deploy_contract``: see :func:`build_model`.

    Returns:
        The trained model (eval mode) and the loss of every step.

    Raises:
        ValueError: ``steps``, ``batch_size`` or ``chunk_size`` < 1.
    """
    if min(cfg.steps, cfg.batch_size, cfg.chunk_size) < 1:
        raise ValueError(
            f"steps, batch_size and chunk_size must be >= 1, got {cfg.steps}, {cfg.batch_size}, {cfg.chunk_size}"
        )
    torch.manual_seed(cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    model = build_model(data, cfg, state_key, deploy_contract)
    targets, is_pad = chunk_targets(data.action, data.episode, cfg.chunk_size)
    targets = (targets - model.action_mean) / model.action_std  # normalised units
    valid = (~is_pad).float().unsqueeze(-1)  # (N, H, 1)
    ids, mask = model.tokenizer.encode(data.tasks)  # per task string; frames index it by task_id
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    cams = model.cfg.cameras
    losses: list[float] = []
    rows = []
    start = time.monotonic()
    log(
        f"train_bc: {len(data)} frames, {data.num_episodes} episodes, {len(data.tasks)} instructions, cameras "
        f"{list(cams) or 'none'}, state {state_key} ({data.state.shape[1]}), {model.num_parameters():,} "
        "parameters"
    )
    model.train()
    for step in range(1, cfg.steps + 1):
        idx = torch.randint(0, len(data), (cfg.batch_size,), generator=g)
        images = [random_shift(data.images[c][idx].float() / 255.0, cfg.shift_px, g) for c in cams]
        losses.append(bc_step(model, opt, data, idx, images, targets, valid, ids, mask))
        if step % cfg.log_every == 0 or step == cfg.steps:
            recent = sum(losses[-cfg.log_every :]) / len(losses[-cfg.log_every :])
            seconds = time.monotonic() - start
            rows.append((step, recent, seconds))
            log(f"step {step:6d}  L1 loss {recent:.4f}  ({seconds:.0f} s)")
    model.eval()
    if out is not None:
        out = pathlib.Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save(out / "model.pt", tasks=data.tasks, losses=losses)
        with open(out / "train_log.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "l1_loss", "seconds"])
            w.writerows((s, f"{v:.5f}", f"{sec:.1f}") for s, v, sec in rows)
        if cfg.export:
            from upright.vla.export import export_onnx

            err = export_onnx(model, out / "policy.onnx", data.tasks)
            log(
                f"train_bc: wrote {out / 'model.pt'} and {out / 'policy.onnx'} (onnxruntime vs torch: max |diff| "
                f"{err:.2g})"
            )
    return model, losses


def dataset_cameras(root: str | pathlib.Path) -> tuple[str, ...]:
    """The cameras a dataset holds (its ``observation.images.<camera>`` features); () when none or no dataset.

    Raises:
        ~upright.dataset_io.check.DatasetError: a damaged dataset, or ``root`` is a file (one line naming the
            file: :func:`~upright.dataset_io.check.check_dataset`).
    """
    info = check_dataset(root)
    if info is None:
        return ()
    feats = info["features"]
    return tuple(k[len(IMAGE_PREFIX) :] for k in feats if k.startswith(IMAGE_PREFIX))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", action="append", required=True, help="LeRobot v3 folder (repeatable)")
    parser.add_argument("--out", required=True, help="folder for model.pt, policy.onnx, train_log.csv")
    d = TrainBCConfig()
    parser.add_argument("--steps", type=int, default=d.steps)
    parser.add_argument("--chunk-size", type=int, default=d.chunk_size, help="H, actions per chunk")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--batch-size", type=int, default=d.batch_size)
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument("--log-every", type=int, default=d.log_every)
    parser.add_argument("--cameras", default=None, help="comma-separated cameras (default: every camera in the data)")
    parser.add_argument("--no-images", action="store_true", help="state and language only")
    parser.add_argument("--state-key", default=STATE_KEY, help="observation.state or observation.policy_obs")
    parser.add_argument("--max-episodes", type=int, default=None, help="first N episodes of each dataset")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument(
        "--deploy-contract",
        help="'lift' or a JSON file: what upright-deploy needs to run the policy "
        "(joints, Kp/Kd, default pose, action mode/scale), stored with the model",
    )
    args = parser.parse_args(argv)
    if args.no_images and args.cameras:
        parser.error("--cameras and --no-images exclude each other; pass one")
    torch.set_num_threads(max(1, args.threads))
    cfg = TrainBCConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        chunk_size=args.chunk_size,
        seed=args.seed,
        log_every=max(1, args.log_every),
    )
    try:
        for root in args.dataset:  # every dataset checked before any is read: a damaged one is one line, exit 2
            check_dataset(root)
        if args.no_images:
            cams: tuple[str, ...] = ()
        elif args.cameras:
            cams = tuple(c for c in args.cameras.split(",") if c)
        else:
            cams = dataset_cameras(args.dataset[0])
        data = concat([load_dataset(p, cams, args.state_key, args.max_episodes) for p in args.dataset])
        contract = read_deploy_contract(args.deploy_contract, data) if args.deploy_contract else None
        train(data, args.out, cfg, args.state_key, deploy_contract=contract)
    except (FileNotFoundError, ValueError) as err:
        parser.exit(2, f"train_bc: {err}\n")


if __name__ == "__main__":
    main()
