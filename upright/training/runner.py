"""``UprightRunner``: rsl-rl-lib's ``OnPolicyRunner`` with one progress line per iteration,
checkpoints at exit (Ctrl-C and SIGTERM included), resume that continues the iteration count, and an
ONNX export with metadata (checked against torch through onnxruntime) at every save.

Crash safety: every checkpoint and ``policy.onnx`` is written to a temporary file beside it, fsynced,
then renamed over the final name (:func:`atomic_write`), so a kill or a full disk during a save leaves
the previous file intact, never a truncated one; ``resume=<run dir>`` skips a corrupt newest checkpoint
with a warning naming it (:func:`latest_checkpoint`).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import pathlib
import shutil
import signal
import statistics
import sys
import time
import zipfile
from collections.abc import Callable
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

from upright.atomic_io import atomic_write, atomic_write_text  # noqa: F401  (re-exported)
from upright.training.multi_critic_ppo import LR_MIN
from upright.training.noise_cut import MetricTrigger, NoiseCutMetricError, fires_on_every_rank
from upright.training.onnx_export import (
    attach_metadata,
    check_onnx_matches_torch,
    export_dynamic_batch,
    quiet_onnx_exporter,
)
from upright.training.std_learning_rate import apply_noise_cut

GROUP_KEYS = ("task", "regularization", "style", "post_task")


def _mean_of_extra(ep_extras: list[dict], key: str) -> float | None:
    """Mean of ``key`` over all logged steps' extras (tensors of any shape, or numbers); None if never logged."""
    vals = [torch.as_tensor(ep[key], dtype=torch.float32).flatten().cpu() for ep in ep_extras if key in ep]
    return float(torch.cat(vals).mean()) if vals else None


class ProgressLogger(Logger):
    """rsl_rl ``Logger`` that writes the same TensorBoard scalars but prints one line per iteration, each quantity
    named with its unit (:func:`progress_line`; ``docs/training.md`` explains every field):

        it 8/12000 | 5,120 env-steps/s | reward per env step: task=0.123 ... | head above feet 0.312 m |
        action bound beta 0.95 | pull force 180 N | stood up 1.0 % of episodes | episode length 123.4 env steps |
        ETA 6 days, 1:00:00 to it 12000 (train.max_iterations)

    What is shown depends on what the env logs: ``Metrics/head_height``, ``Metrics/success``, ``Curriculum/level``,
    ``Metrics/action_scale`` (β), ``Curriculum/pull_force_level``, ``Metrics/stood_from_posture``, and for
    ``recipe=getup`` ``Metrics/host_success``, ``Metrics/pelvis_passed_0.5``, ``Metrics/standing_start_time_up``."""

    on_iteration_done: Callable[[int], None] | None = None
    """Called with the iteration index after it is logged."""
    group_names: tuple[str, ...] = GROUP_KEYS
    """Reward groups printed on the progress line (the env's ``reward_group_names``; standup's by default)."""

    def log(self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float, **kwargs: Any) -> None:
        if self.on_iteration_done is not None:
            self.on_iteration_done(it)
        if self.writer is None:  # ranks other than 0 of a distributed run do not log
            return
        groups = {}
        for g in self.group_names:
            vals = [ep[f"Episode_Reward/group/{g}"] for ep in self.ep_extras if f"Episode_Reward/group/{g}" in ep]
            groups[g] = float(torch.cat([v.flatten() for v in vals]).mean()) if vals else float("nan")
        extras = {key: _mean_of_extra(self.ep_extras, key) for key in PROGRESS_EXTRAS}
        with contextlib.redirect_stdout(io.StringIO()):  # the parent prints a multi-line block
            super().log(
                it=it, start_it=start_it, total_it=total_it, collect_time=collect_time, learn_time=learn_time, **kwargs
            )
        done = it + 1 - start_it
        eta = self.tot_time / max(done, 1) * (total_it - start_it - done)
        fps = self.cfg["num_steps_per_env"] * self.num_envs * self.gpu_world_size / (collect_time + learn_time)
        ep_len = statistics.mean(self.lenbuffer) if self.lenbuffer else None
        print(progress_line(it + 1, total_it, fps, groups, extras, ep_len, eta), flush=True)


PROGRESS_EXTRAS = (
    "Metrics/head_height",
    "Metrics/success",
    "Curriculum/level",
    "Metrics/host_success",
    "Metrics/pelvis_passed_0.5",
    "Metrics/standing_start_time_up",
    "Metrics/action_scale",
    "Curriculum/pull_force_level",
    "Metrics/stood_from_posture",
)
"""The env's logged quantities the progress line shows (means over the iteration's logged steps)."""


def progress_line(
    done: int,
    total: int,
    fps: float,
    groups: dict[str, float],
    extras: dict[str, float | None],
    ep_len: float | None,
    eta_s: float,
) -> str:
    """The progress line of iteration ``done`` (1-based: ``done`` iterations are complete) of ``total``
    (``train.max_iterations``), every quantity named with its unit:

    - ``reward per env step``: each reward group's mean reward per env step over the episodes that ended (``-``: none
      ended in this iteration);
    - ``head above feet``: the head's height above the mean height of the two feet (HoST's measure), averaged over
      all envs and the iteration's steps: about 0-0.1 m lying, 0.6 m sitting, 1.2 m standing; negative when the head
      is below the feet (a leg raised while lying, a head-down start on a slope);
    - ``success`` (lift): share of the episodes that ended with the cube at the target at some step; ``curriculum
      level`` in [0, 1];
    - ``action bound beta`` and ``pull force`` (standup curricula), ``stood up``: share of the episodes from the lying
      posture that ended with the head above the curriculum's threshold;
    - ``recipe=getup``: ``pelvis above 0.5 m`` and ``HoST success`` (share of the episodes that did not start
      standing), ``standing starts kept up`` (seconds);
    - ``episode length`` in env steps; ``ETA`` to iteration ``total``, from this run's mean time per iteration.
    """
    group_str = " ".join(f"{g}={v:.3f}" if v == v else f"{g}=-" for g, v in groups.items())  # '-': no episode ended
    parts = [f"it {done}/{total}", f"{fps:,.0f} env-steps/s", f"reward per env step: {group_str}"]
    x = extras.get
    if x("Metrics/head_height") is not None:
        parts.append(f"head above feet {x('Metrics/head_height'):.3f} m")
    if x("Metrics/success") is not None:
        parts.append(f"success {100 * x('Metrics/success'):.1f} % of episodes")
    if x("Curriculum/level") is not None:
        parts.append(f"curriculum level {x('Curriculum/level'):.2f}")
    if x("Metrics/host_success") is not None:  # recipe=getup: the rising indicators over episodes not started standing
        if x("Metrics/pelvis_passed_0.5") is not None:
            parts.append(f"pelvis above 0.5 m {100 * x('Metrics/pelvis_passed_0.5'):.1f} % of episodes")
        parts.append(f"HoST success {100 * x('Metrics/host_success'):.1f} % of episodes")
        if x("Metrics/standing_start_time_up") is not None:
            parts.append(f"standing starts kept up {x('Metrics/standing_start_time_up'):.1f} s")
    else:
        if x("Metrics/action_scale") is not None:
            parts.append(f"action bound beta {x('Metrics/action_scale'):.2f}")
        if x("Curriculum/pull_force_level") is not None:
            parts.append(f"pull force {x('Curriculum/pull_force_level'):.0f} N")
        if x("Metrics/stood_from_posture") is not None:
            parts.append(f"stood up {100 * x('Metrics/stood_from_posture'):.1f} % of episodes")
    parts.append(f"episode length {ep_len:.1f} env steps" if ep_len is not None else "episode length -")
    parts.append(f"ETA {datetime.timedelta(seconds=int(eta_s))} to it {total} (train.max_iterations)")
    return " | ".join(parts)


def checkpoint_name(completed_iterations: int) -> str:
    """The file name of the checkpoint saved after ``completed_iterations`` iterations: rsl-rl names checkpoints by
    the index of the last iteration, counted from 0, so the progress line's ``it 8/...`` is ``model_7.pt``."""
    return f"model_{completed_iterations - 1}.pt"


def interrupted_message(completed_iterations: int, log_dir: str | None) -> str:
    """What Ctrl-C or SIGTERM prints: how many iterations are done and the file that holds them (or why none)."""
    if not log_dir:
        return f"\nInterrupted after {completed_iterations} iterations (no log directory: nothing saved)."
    if completed_iterations <= 0:
        return "\nInterrupted before the first iteration completed: no checkpoint written."
    path = os.path.join(log_dir, checkpoint_name(completed_iterations))
    return (
        f"\nInterrupted after {completed_iterations} iterations (it {completed_iterations}/...): saving {path} "
        f"(checkpoints are named by the last iteration's index, counted from 0)."
    )


class UprightRunner(OnPolicyRunner):
    """OnPolicyRunner + progress line, safe exit, counted resume and ONNX export on every save.

    Args:
        env: a ``VecEnv`` (e.g. :class:`~upright.tasks.standup.env.StandupEnv`).
        train_cfg: rsl-rl-lib runner config dict.
        log_dir: run directory (checkpoints ``model_<it>.pt``, ``policy.onnx``, TensorBoard events).
        device: torch device.
        onnx_metadata: metadata written into every exported ONNX file.
        update_threads: torch threads of the PPO update (0: all CPUs).
        onnx_snapshots: also keep ``policy_<completed iterations>.onnx`` at every save (``train.onnx_snapshots``).
        onnx_dynamic_batch: export ``policy.onnx`` with a dynamic batch axis (:func:`export_dynamic_batch`; residual
            runs, whose graph runs for all envs in one call) instead of rsl-rl's batch-1 export (the deploy daemon's
            standup and lift files).
    """

    def __init__(
        self,
        env,
        train_cfg: dict,
        log_dir: str | None,
        device: str = "cpu",
        onnx_metadata: dict | None = None,
        update_threads: int = 0,
        onnx_snapshots: bool = False,
        onnx_dynamic_batch: bool = False,
    ):
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self.onnx_snapshots = bool(onnx_snapshots)
        """Keep ``policy_<completed iterations>.onnx`` beside ``policy.onnx`` at every save."""
        self.onnx_dynamic_batch = bool(onnx_dynamic_batch)
        """Export ``policy.onnx`` with a dynamic batch axis (else batch 1)."""
        self._use_cpu_thread_split(update_threads)
        logger = ProgressLogger.__new__(ProgressLogger)
        logger.__dict__.update(self.logger.__dict__)
        logger.on_iteration_done = self._iteration_done
        logger.group_names = tuple(getattr(env, "reward_group_names", GROUP_KEYS))
        self.logger = logger
        self.onnx_metadata = dict(onnx_metadata or {})
        self.completed_iterations = 0
        """Number of PPO iterations finished in this run, counting those before a resume."""
        self.noise_cut: tuple[int | None, float, float] | None = None
        """(iteration or None, std, entropy coefficient) of ``train.noise_cut_*`` (:func:`apply_noise_cut`), or None."""
        self.noise_cut_applied = False
        """The noise cut has set the action std in this run (saved in the checkpoints' ``infos``)."""
        self.noise_cut_trigger: MetricTrigger | None = None
        """``train.noise_cut_metric``: cuts the noise before :attr:`noise_cut`'s iteration when it fires."""
        self.noise_cut_at: int | None = None
        """Completed iterations when this run's noise cut was applied (None: not yet, or not recorded)."""
        self.critic_warmup_iterations = 0
        """``train.critic_warmup_iterations``: iterations 0 .. N-1 of the run update the critics only."""

    def _configure_multi_gpu(self) -> None:
        """rsl-rl-lib's multi-process setup (torchrun env vars; NCCL on ``cuda:<LOCAL_RANK>``), extended to
        CPU processes with the gloo backend (for tests and CPU clusters)."""
        world_size = int(os.getenv("WORLD_SIZE", "1"))
        if world_size > 1 and torch.device(self.device).type == "cpu":
            self.gpu_world_size, self.is_distributed = world_size, True
            self.gpu_local_rank = int(os.getenv("LOCAL_RANK", "0"))
            self.gpu_global_rank = int(os.getenv("RANK", "0"))
            self.cfg["multi_gpu"] = {
                "global_rank": self.gpu_global_rank,
                "local_rank": self.gpu_local_rank,
                "world_size": world_size,
            }
            if not torch.distributed.is_initialized():
                torch.distributed.init_process_group(backend="gloo", rank=self.gpu_global_rank, world_size=world_size)
            return
        super()._configure_multi_gpu()

    def parameters_in_sync(self) -> float:
        """Max |difference| between this rank's actor+critic state (weights and normaliser statistics) and
        rank 0's (0.0 when not distributed)."""
        models = (self.alg.get_policy(), self.alg.critic)
        params = torch.cat([t.detach().float().flatten() for m in models for t in m.state_dict().values()])
        if not self.is_distributed:
            return 0.0
        reference = params.clone()
        torch.distributed.broadcast(reference, src=0)
        return float((params - reference).abs().max())

    def _use_cpu_thread_split(self, update_threads: int) -> None:
        """On CPU: 1 torch thread while collecting (the physics pool owns the cores; torch's idle OpenMP
        workers would spin against it), ``update_threads`` (0 = all CPUs) for the PPO update."""
        if torch.device(self.device).type != "cpu":
            return
        n_update = update_threads or os.cpu_count() or 1
        update = self.alg.update

        def update_with_threads():
            torch.set_num_threads(n_update)
            try:
                return update()
            finally:
                torch.set_num_threads(1)

        self.alg.update = update_with_threads
        torch.set_num_threads(1)

    def _iteration_done(self, it: int) -> None:
        self.completed_iterations = it + 1
        self.apply_noise_cut(triggered=self._metric_trigger_fires())
        self._set_actor_frozen()

    def _set_actor_frozen(self) -> None:
        """Critic warm-up: the next update trains the critics only while fewer than
        :attr:`critic_warmup_iterations` iterations are complete (prints when the actor joins)."""
        frozen = self.completed_iterations < self.critic_warmup_iterations
        if getattr(self.alg, "actor_frozen", False) and not frozen:
            adaptive = getattr(self.alg, "schedule", None) == "adaptive"
            start = f", from learning rate {LR_MIN:g} (the adaptive schedule's floor)" if adaptive else ""
            print(
                f"Critic warm-up done after iteration {self.completed_iterations}: the actor trains{start}", flush=True
            )
        if hasattr(self.alg, "set_actor_frozen"):  # MultiCriticPPO (what rsl_rl_config builds)
            self.alg.set_actor_frozen(frozen)
        elif frozen:
            raise ValueError(f"train.critic_warmup_iterations needs MultiCriticPPO, not {type(self.alg).__name__}")

    def _metric_trigger_fires(self) -> bool:
        """Feed this iteration's mean of ``train.noise_cut_metric`` to :attr:`noise_cut_trigger` (rank 0 logs the
        episodes: :func:`~upright.training.noise_cut.fires_on_every_rank`); True when the cut is due now."""
        if self.noise_cut_trigger is None or self.noise_cut_applied:
            return False
        value = _mean_of_extra(self.logger.ep_extras, self.noise_cut_trigger.metric)
        logs = self.logger.writer is not None
        return fires_on_every_rank(self.noise_cut_trigger, value, logs, self.is_distributed, self.device)

    def apply_noise_cut(self, triggered: bool = False) -> None:
        """Apply ``train.noise_cut_*`` (:attr:`noise_cut`) when due: after an iteration's update (``triggered``:
        :attr:`noise_cut_trigger` fired in it) and at a resume. A cut made by the trigger holds at a resume before
        the configured iteration: its std stays what the policy learned since, and its entropy coefficient holds."""
        if self.noise_cut is None:
            return
        iteration, std, entropy_coef = self.noise_cut
        if triggered or self.noise_cut_applied:
            iteration = self.completed_iterations
        if apply_noise_cut(self.alg, self.completed_iterations, iteration, std, entropy_coef, self.noise_cut_applied):
            self.noise_cut_applied, self.noise_cut_at = True, self.completed_iterations
            print(
                f"Noise cut after iteration {self.completed_iterations}: action std {std}, entropy "
                f"coefficient {self.alg.entropy_coef} (train.noise_cut_*)",
                flush=True,
            )

    def learn_until(self, max_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """Train until ``max_iterations`` iterations are complete in total; save at exit, Ctrl-C and SIGTERM
        included."""
        remaining = max_iterations - self.completed_iterations
        if remaining <= 0:
            print(
                f"Already {self.completed_iterations} iterations done (max_iterations={max_iterations}); nothing to do."
            )
            return
        self.current_learning_iteration = self.completed_iterations
        self._set_actor_frozen()

        def _sigterm(signum, frame):  # turn SIGTERM into the same path as Ctrl-C
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, _sigterm)
        try:
            # rsl_rl's learn() saves every save_interval and at its end
            super().learn(num_learning_iterations=remaining, init_at_random_ep_len=init_at_random_ep_len)
        except (KeyboardInterrupt, NoiseCutMetricError) as err:  # Ctrl-C, SIGTERM, a train.noise_cut_metric typo
            if isinstance(err, KeyboardInterrupt):
                print(interrupted_message(self.completed_iterations, self.logger.log_dir), flush=True)
            rank0 = not self.is_distributed or self.gpu_global_rank == 0  # one writer of model_<n>.pt
            if rank0 and self.logger.log_dir and self.completed_iterations > 0:
                self.save(os.path.join(self.logger.log_dir, checkpoint_name(self.completed_iterations)))
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)

    def save(self, path: str, infos: dict | None = None) -> None:
        """Save the checkpoint (atomically: a temporary file, fsync, rename), then export ``policy.onnx`` beside it
        (metadata attached, checked to 1e-5, also renamed into place only when complete)."""
        infos = dict(infos or {})
        infos["completed_iterations"] = self.completed_iterations
        infos["noise_cut_applied"] = self.noise_cut_applied
        infos["noise_cut_at"] = self.noise_cut_at
        infos["env_step_counter"] = self.completed_iterations * self.cfg["num_steps_per_env"] * self.env.num_envs
        if hasattr(self.env, "state_dict"):  # the env's curricula continue on resume
            infos["env_state"] = self.env.state_dict()
        # rsl-rl-lib's OnPolicyRunner.save, with the file written atomically
        saved = self.alg.save()
        saved["iter"] = self.current_learning_iteration
        saved["infos"] = infos
        atomic_write(path, lambda tmp: torch.save(saved, tmp))
        self.logger.save_model(path, self.current_learning_iteration)
        run_dir = pathlib.Path(path).parent
        try:
            self.export_onnx(run_dir / "policy.onnx")
            if self.onnx_snapshots:
                shutil.copyfile(run_dir / "policy.onnx", run_dir / f"policy_{self.completed_iterations}.onnx")
        except Exception as err:  # noqa: BLE001  an export failure must never kill training (mjlab's rule)
            print(f"WARNING: ONNX export failed: {err}", flush=True)

    def export_onnx(self, path: pathlib.Path) -> float:
        """Export the actor to ``path`` with metadata; return the max |onnx - torch| on random inputs.

        The file is built and checked under a temporary name, then renamed over ``path`` (a failed export or check
        leaves the previous ``path`` as it was).

        Raises:
            AssertionError: onnxruntime and torch disagree by more than 1e-5 (``path`` is left unchanged).
        """
        path = pathlib.Path(path)
        was_training = self.alg.actor.training
        errors = []

        def write(tmp: pathlib.Path) -> None:
            with quiet_onnx_exporter():
                if self.onnx_dynamic_batch:
                    export_dynamic_batch(self.alg.get_policy().as_onnx(verbose=False), tmp)
                else:
                    self.export_policy_to_onnx(str(tmp.parent), tmp.name)
            attach_metadata(tmp, {**self.onnx_metadata, "iteration": self.completed_iterations})
            # as_onnx() copies the actor; the copy goes to the CPU, where onnxruntime checks it (a CUDA-trained
            # actor failed this check on every save before)
            policy = self.alg.get_policy().as_onnx(verbose=False).to("cpu").eval()
            # the env's current observations (real inputs, through the embedded normaliser) and perturbed copies
            real = self.env.get_observations()["actor"][:32]
            noise = torch.randn(real.shape, generator=torch.Generator().manual_seed(0)).to(real.device)
            errors.append(check_onnx_matches_torch(tmp, policy, torch.cat([real, real + 0.1 * noise])))

        try:
            atomic_write(path, write)
        finally:
            if was_training:
                self.alg.train_mode()
        return errors[0]

    def load(
        self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None
    ) -> dict:
        """Load a checkpoint (models + optimizer); the run continues after its last completed iteration."""
        infos = super().load(path, load_cfg=load_cfg, strict=strict, map_location=map_location) or {}
        loaded = torch.load(path, weights_only=False, map_location=map_location)
        self.completed_iterations = int(infos.get("completed_iterations", loaded["iter"] + 1))
        self.noise_cut_applied = bool(infos.get("noise_cut_applied", False))
        self.noise_cut_at = infos.get("noise_cut_at")
        # the env's curricula continue on a full resume only (load_cfg None); loading just the actor for
        # evaluation or play must not carry training-time state such as the pull force into that env
        if load_cfg is None and "env_state" in infos and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(infos["env_state"])
        self.current_learning_iteration = self.completed_iterations
        return infos


def checkpoint_problem(path: str | pathlib.Path) -> str | None:
    """Why ``path`` is not a readable checkpoint (truncated, corrupt, not a torch file), or None when it is intact.

    torch's zip checkpoints are checked by reading every member against its CRC (no unpickling); anything else must
    load with ``torch.load``.
    """
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
        return None if bad is None else f"member {bad} fails its CRC"
    except zipfile.BadZipFile as err:
        zip_error = str(err)
    except OSError as err:
        return str(err)
    try:
        torch.load(path, map_location="cpu", weights_only=False)
        return None
    except Exception as err:  # noqa: BLE001 - any failure to load means the file cannot be resumed
        return f"{zip_error}; torch.load: {err}"


def latest_checkpoint(run_or_file: str | pathlib.Path) -> pathlib.Path:
    """Resolve ``resume=``: a checkpoint file, or a run directory (its highest intact ``model_<it>.pt``).

    In a run directory, a newest checkpoint that is truncated or corrupt (a kill during a save before saves were
    atomic, a full disk, a bad copy) is skipped with a warning naming it, and the next intact one is used.

    Raises:
        FileNotFoundError: nothing to resume from (the message says what was looked for, and names every corrupt file).
        ValueError: ``run_or_file`` is a checkpoint file that cannot be read (the message names it and why).
    """
    p = pathlib.Path(run_or_file).expanduser()
    if p.is_file():
        problem = checkpoint_problem(p)
        if problem:
            raise ValueError(
                f"resume={run_or_file}: {p} is not a readable checkpoint ({problem}); "
                f"resume={p.parent} uses the newest intact checkpoint of that run"
            )
        return p
    if p.is_dir():
        ckpts = sorted((f for f in p.glob("model_*.pt") if f.stem[6:].isdigit()), key=lambda f: int(f.stem[6:]))
        skipped = []
        for ckpt in reversed(ckpts):
            problem = checkpoint_problem(ckpt)
            if problem is None:
                if skipped:
                    print(
                        f"WARNING: resume={run_or_file}: skipped {', '.join(skipped)}; resuming from {ckpt}",
                        file=sys.stderr,
                        flush=True,
                    )
                return ckpt
            skipped.append(f"{ckpt} (truncated or corrupt: {problem})")
        if skipped:
            raise FileNotFoundError(f"No intact checkpoint in run directory {p}: {', '.join(skipped)}")
        raise FileNotFoundError(f"No checkpoint model_<iteration>.pt in run directory {p}")
    raise FileNotFoundError(f"resume={run_or_file}: no such checkpoint file or run directory")


def wall_clock() -> float:
    """Monotonic seconds (for run timing)."""
    return time.monotonic()
