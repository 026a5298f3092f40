"""The noise cut's metric trigger (``train.noise_cut_metric``): cut the action noise when a training indicator says the
policy has learned the task's first stage, instead of only at a fixed iteration (``train.noise_cut_iteration``).

For the get-up (``recipe=getup``): once the pelvis passes 0.5 m in most training episodes that start on the ground
(``Metrics/pelvis_passed_0.5``, logged by ``upright/tasks/standup/env.py``), the policy gets up, and what is left is
staying up, which the exploration noise of the first stage prevents
(``docs/experiments/2026-11-27_getup_action_noise.md``).
Not HoST: HoST keeps one noise schedule for the whole run.
"""

from __future__ import annotations

import collections
import math

from upright.conf.train_cfg import noise_cut_metric_problem


class NoiseCutMetricError(ValueError):
    """``train.noise_cut_metric`` names a quantity the env never logged (a typo, or another task's metric)."""


class MetricTrigger:
    """Fires once the moving mean of an episode metric over ``window`` iterations reaches ``at_least``.

    Only iterations after the first ``warmup`` of this process count: rsl-rl starts (and resumes) every env at a
    random point of its episode clock, so until every env has reset once, the episodes that end are those that began
    mid-episode or ended early (an env may log them, or drop them as the get-up env does), not a sample of the
    policy's episodes (``warmup`` = the episode length in iterations, :meth:`for_env`). Iterations where no episode
    logged the metric are skipped, not zeros.

    Args:
        metric: the name the env logs the metric under (``extras["log"]``), e.g. ``Metrics/pelvis_passed_0.5``.
        at_least: the threshold on the moving mean, in the metric's units (a fraction in [0, 1] for that one).
        window: iterations in the moving mean (>= 1).
        warmup: iterations of this process (start or resume) whose values are ignored (>= 0).

    Raises:
        ValueError: bad ``metric``/``at_least``/``window`` (:func:`noise_cut_metric_problem`).
    """

    def __init__(self, metric: str, at_least: float, window: int, warmup: int):
        problem = noise_cut_metric_problem(metric, at_least, window)
        if problem:
            raise ValueError(problem)
        self.metric, self.at_least, self.window, self.warmup = metric, float(at_least), int(window), max(int(warmup), 0)
        self.values: collections.deque[float] = collections.deque(maxlen=self.window)
        self.iterations_seen = 0
        """Iterations of this process passed to :meth:`update`."""
        self.ever_logged = False

    @classmethod
    def for_env(cls, metric: str, at_least: float, window: int, max_episode_length: int, steps_per_env: int):
        """A trigger whose warm-up is one episode: ``ceil(max_episode_length / steps_per_env)`` iterations (env steps
        per episode over env steps per iteration)."""
        return cls(metric, at_least, window, math.ceil(int(max_episode_length) / max(int(steps_per_env), 1)))

    @property
    def mean(self) -> float | None:
        """The moving mean of the counted values, or None before the first."""
        return sum(self.values) / len(self.values) if self.values else None

    def update(self, value: float | None) -> bool:
        """Count one iteration's mean of the metric (None: no episode logged it); True when the trigger fires now
        (a full window whose mean is >= ``at_least``).

        Raises:
            NoiseCutMetricError: ``2 * warmup + window`` iterations passed and no episode ever logged the metric (an
                env may log a metric only for episodes that began after this process started: one warm-up for the
                first of them to end, one more for the margin).
        """
        self.iterations_seen += 1
        if value is not None:
            self.ever_logged = True
        if not self.ever_logged and self.iterations_seen >= 2 * self.warmup + self.window:
            raise NoiseCutMetricError(
                f"train.noise_cut_metric={self.metric} was not logged in {self.iterations_seen} iterations: name a "
                f"metric this env logs (TensorBoard's Metrics/* tags, e.g. Metrics/pelvis_passed_0.5 for "
                f"recipe=getup), or set train.noise_cut_metric=null"
            )
        if value is None or self.iterations_seen <= self.warmup:
            return False
        self.values.append(float(value))
        return len(self.values) == self.window and self.mean >= self.at_least


def fires_on_every_rank(trigger: MetricTrigger, value: float | None, logs: bool, distributed: bool, device) -> bool:
    """One iteration of ``trigger`` in a (possibly distributed) run: the rank that logs episodes (``logs``: rank 0)
    updates it with ``value``; its answer, or its error, is broadcast to the other ranks, so every rank cuts the
    noise, or stops, in the same iteration. The logging rank prints the moving mean when the trigger fires.

    Raises:
        NoiseCutMetricError: the metric was never logged (:meth:`MetricTrigger.update`), on every rank.
    """
    fires, error = False, None
    if logs:
        try:
            fires = trigger.update(value)
        except NoiseCutMetricError as err:
            error = err
    if distributed:  # 0: not yet, 1: cut, 2: rank 0 stops the run (every rank does)
        import torch

        flag = torch.tensor([2.0 if error else float(fires)], device=device)
        torch.distributed.broadcast(flag, src=0)
        fires = flag.item() == 1.0
        if flag.item() == 2.0 and error is None:
            error = NoiseCutMetricError(f"train.noise_cut_metric={trigger.metric} was not logged (rank 0 stopped)")
    if error is not None:
        raise error
    if fires and logs:
        print(
            f"{trigger.metric}: mean {trigger.mean:.3f} over {trigger.window} iterations >= {trigger.at_least:g} "
            "(train.noise_cut_metric)",
            flush=True,
        )
    return fires
