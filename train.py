"""Train a policy: ``python train.py task=standup|lift|reach|<any task folder> [env.num_envs=N]
[train.max_iterations=K] [seed=S] [run.name=NAME] [resume=<run dir or checkpoint>]``.

Writes ``logs/<task>/<run.name>/``: checkpoints ``model_<it>.pt``, ``policy.onnx`` (with metadata),
TensorBoard events and the resolved config. Ctrl-C saves a checkpoint before exiting.
"""

from __future__ import annotations

import sys

from upright.gl import choose_offscreen_gl

if any(a.startswith("recipe=vlm") or "vlm_reward.enabled" in a for a in sys.argv[1:]):
    choose_offscreen_gl()  # the reward renders frames: EGL or OSMesa, chosen before MuJoCo is imported (read once)

import hydra
from omegaconf import DictConfig

from upright.conf import register_configs, with_task_groups
from upright.conf.validate import exit_on_invalid_overrides, split_hydra_flags

register_configs()


@hydra.main(version_base=None, config_name="config")
def main(cfg: DictConfig) -> None:
    from upright.robots.menagerie import ModelNotFoundError
    from upright.sim import BackendUnsupportedError
    from upright.training.noise_cut import NoiseCutMetricError
    from upright.training.train_loop import ResumeMismatchError, train

    residual_setup = None
    if cfg.get("policy") is not None and cfg.policy.get("base"):  # residual RL: the VLA floor's setup
        from upright.vla import residual_setup

        try:
            residual_setup.check_base_answers(str(cfg.policy.base))  # a policy server must answer before the run
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)
    try:
        train(cfg, residual_setup=residual_setup)
    except KeyboardInterrupt:
        sys.exit(130)
    except (
        ModelNotFoundError,
        FileExistsError,
        BackendUnsupportedError,
        ResumeMismatchError,
        NoiseCutMetricError,
    ) as err:
        # no robot model; run.name of a run that has checkpoints; a model the chosen sim.backend cannot run; a resume=
        # checkpoint of another network layout; a train.noise_cut_metric the env never logs (after a checkpoint)
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)
        sys.exit(2)


if __name__ == "__main__":
    exit_on_invalid_overrides()
    overrides, hydra_flags = split_hydra_flags(sys.argv[1:])  # --cfg job, --help: Hydra reads them after the overrides
    # task=lift: the standup-only groups select their empty option; Hydra's own output dir is not used: upright manages
    # run directories itself.
    sys.argv[1:] = [*with_task_groups(overrides), "hydra.run.dir=.", "hydra.output_subdir=null", *hydra_flags]
    main()
