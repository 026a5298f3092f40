"""Fine-tune a TinyVLA base on intervention data (:mod:`upright.vla.intervention`), fully or with LoRA (peft).

    python -m upright.vla.finetune --base runs/tiny_vla --dataset data/interventions [--dataset ...]
        --weighting bc|intervention|sirius [--lora-rank 8] [--steps 1000] [--lr 3e-4]
        [--lr-schedule constant|cosine] --out runs/tiny_vla_ft

Reads the base's ``model.pt`` (its cameras and state feature decide what is loaded), weights every frame by
``--weighting``, fine-tunes, folds LoRA adapters back into the weights and writes ``model.pt`` and ``policy.onnx``
(the same files as ``train_bc``; evaluate with ``python -m upright.vla.evaluate_lift --policy OUT``) plus
``finetune.json`` (weighting, frame counts per class, steps, final loss, trainable parameter count).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import torch

from upright.vla.intervention import (
    LR_SCHEDULES,
    WEIGHTINGS,
    WeightingCfg,
    add_lora,
    finetune,
    load_episode_success,
    load_intervention_flags,
    merge_lora,
    sample_weights,
)


def main(argv: list[str] | None = None) -> None:
    from upright.vla.dataset import concat, load_dataset
    from upright.vla.tiny import TinyVLA

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="folder with the base's model.pt, or the file")
    parser.add_argument("--dataset", action="append", required=True, help="LeRobot v3 folder (repeatable)")
    parser.add_argument("--weighting", choices=WEIGHTINGS, default="sirius")
    parser.add_argument("--lora-rank", type=int, default=0, help="LoRA rank (peft); 0: full fine-tuning")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument(
        "--lr-schedule",
        choices=LR_SCHEDULES,
        default="constant",
        help="constant, or cosine decay from --lr to 0 over the steps",
    )
    parser.add_argument("--seed", type=int, default=0)
    d = WeightingCfg()
    parser.add_argument(
        "--intervention-weight",
        type=float,
        default=d.intervention_weight,
        help=f"weight of a human frame (intervention, sirius; default {d.intervention_weight})",
    )
    parser.add_argument(
        "--pre-intervention-weight",
        type=float,
        default=d.pre_intervention_weight,
        help=f"weight of a pre-intervention frame (sirius; default {d.pre_intervention_weight})",
    )
    parser.add_argument("--max-episodes", type=int, default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.lora_rank < 0:
        parser.error("--steps must be >= 1 and --lora-rank >= 0")
    if args.intervention_weight < 0 or args.pre_intervention_weight < 0:
        parser.error("--intervention-weight and --pre-intervention-weight must be >= 0")
    wcfg = WeightingCfg(
        intervention_weight=args.intervention_weight, pre_intervention_weight=args.pre_intervention_weight
    )
    torch.set_num_threads(1)
    base_path = pathlib.Path(args.base)
    base_path = base_path / "model.pt" if base_path.is_dir() else base_path
    try:
        model = TinyVLA.load(base_path)
        c = model.cfg
        datas = [load_dataset(p, c.cameras, c.state_key, args.max_episodes) for p in args.dataset]
        flags = torch.cat([load_intervention_flags(p, args.max_episodes) for p in args.dataset])
        data = concat(datas)
        success = torch.cat([load_episode_success(p, args.max_episodes) for p in args.dataset])
        weights = sample_weights(flags, data.episode, args.weighting, wcfg, success)
        trainable = model if args.lora_rank == 0 else add_lora(model, args.lora_rank)
        n_train = sum(p.numel() for p in trainable.parameters() if p.requires_grad)
        losses = finetune(
            trainable, data, weights, args.steps, args.batch_size, args.lr, args.seed, lr_schedule=args.lr_schedule
        )
    except (FileNotFoundError, ValueError, ImportError) as err:
        parser.exit(2, f"finetune: {err}\n")
    model = merge_lora(trainable) if args.lora_rank else trainable.eval()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "model.pt", tasks=data.tasks, losses=losses)
    from upright.vla.export import export_onnx

    err = export_onnx(model, out / "policy.onnx", data.tasks)
    report = {
        "base": str(base_path),
        "datasets": args.dataset,
        "weighting": args.weighting,
        "intervention_weight": wcfg.intervention_weight,
        "pre_intervention_weight": wcfg.pre_intervention_weight,
        "lora_rank": args.lora_rank,
        "trainable_parameters": n_train,
        "steps": args.steps,
        "lr": args.lr,
        "lr_schedule": args.lr_schedule,
        "final_loss": sum(losses[-50:]) / len(losses[-50:]),
        "frames": len(data),
        "intervention_frames": int(flags.sum()),
        "pre_intervention_frames": int(((weights == wcfg.pre_intervention_weight) & ~flags).sum())
        if args.weighting == "sirius"
        else None,
        "failed_episode_robot_frames": int((~success & ~flags).sum()),
    }
    (out / "finetune.json").write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"finetune: wrote {out / 'model.pt'} and {out / 'policy.onnx'} (onnxruntime vs torch {err:.2g}); "
        f"{n_train:,} trainable parameters"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
