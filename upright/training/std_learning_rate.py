"""Learning rates of their own for the policy's action std and for the critics, outside the adaptive-KL schedule.

Why: with HoST's actor (456 normalised inputs → [512, 256, 128] ELU → 23 Tanh) Adam's near sign-sized steps move the
action mean so far that rsl_rl's adaptive-KL schedule (desired KL 0.01) pins the learning rate at its 1e-5 floor from
the first iteration on this project's 512-env batches. Measured on the 551-iteration ground checkpoint
(``docs/std_learning_rate.md``): one Adam step at lr 1e-4 already gives KL 0.03, at 1e-3 KL 1.8–3.6. The mean still
moves (KL 0.04–0.1 per update at the floor), but the state-independent std, a 23-vector that moves at most ``lr``
per Adam step, can move only 20 · 1e-5 = 2e-4 per update: it stayed at 0.79 (init 0.8) for 550 iterations, so the
policy kept exploring with noise ~0.8 of its full action range.

With ``std_learning_rate`` set, the std parameter gets its own Adam parameter group with that fixed rate; the adaptive
schedule sets only the other group. ``None`` keeps rsl_rl's single group (the plain HoST update).

``critic_learning_rate`` does the same for the critics (the adaptive schedule follows the ACTOR's KL, so at this
project's batch sizes it also held the critics at 1e-5: the audit of 2026-11 measured their explained variance rising
within 8 iterations at a fixed 1e-3). Groups are named (:data:`GROUP_KEY`).

Checkpoints written with one group load into two groups and back: Adam's per-parameter state is re-indexed
(:func:`convert_optimizer_state`), so a run can switch the option on at a resume.
"""

from __future__ import annotations

import copy
import math
from itertools import chain

import torch
import torch.nn as nn

from upright.conf.train_cfg import noise_cut_problem

FIXED_LR_KEY = "fixed_lr"
"""Param-group flag: the adaptive-KL schedule leaves this group's ``lr`` alone."""


def _find_std(actor: nn.Module) -> tuple[str, nn.Parameter] | None:
    """(attribute name, parameter) of the actor's state-independent std: rsl_rl ``GaussianDistribution``'s
    ``std_param`` (the std) or ``log_std_param`` (its log); None if the actor has neither."""
    dist = getattr(actor, "distribution", None)
    for name in ("std_param", "log_std_param"):
        param = getattr(dist, name, None)
        if isinstance(param, nn.Parameter):
            return name, param
    return None


def std_parameter(actor: nn.Module) -> nn.Parameter:
    """The actor's state-independent std parameter (rsl_rl ``GaussianDistribution``: ``std_param`` or
    ``log_std_param``, shape (num_actions,)).

    Raises:
        ValueError: The actor has no such parameter (e.g. a state-dependent std head).
    """
    found = _find_std(actor)
    if found is None:
        raise ValueError(
            "std_learning_rate needs an actor with a state-independent std (rsl_rl GaussianDistribution); "
            f"{type(actor).__name__} has none. Set train.std_learning_rate=null."
        )
    return found[1]


def _param_order(actor: nn.Module, critic: nn.Module) -> list[nn.Parameter]:
    """rsl_rl PPO's optimizer order: ``chain(actor.parameters(), critic.parameters())``."""
    return list(chain(actor.parameters(), critic.parameters()))


GROUP_KEY = "upright_group"
"""Param-group name: ``main`` (the adaptive-KL schedule's), ``std`` (``train.std_learning_rate``) or ``critic``
(``train.critic_learning_rate``). A saved state without it is rsl_rl's one group, or ``main`` + ``std`` (the only
two-group layout before the critic group existed)."""


def group_layout(
    actor: nn.Module, critic: nn.Module, std_lr: float | None, critic_lr: float | None = None
) -> list[tuple[str, list[nn.Parameter]]]:
    """The optimizer's parameter groups for these settings, in order: ``main`` (every parameter not in another
    group, in rsl_rl's order), then ``std`` when ``std_lr`` is set, then ``critic`` when ``critic_lr`` is set.

    Raises:
        ValueError: ``std_lr`` is set and the actor has no state-independent std.
    """
    order = _param_order(actor, critic)
    std = std_parameter(actor) if std_lr is not None else None
    critic_ids = {id(p) for p in critic.parameters()} if critic_lr is not None else set()
    groups = [("main", [p for p in order if p is not std and id(p) not in critic_ids])]
    if std is not None:
        groups.append(("std", [std]))
    if critic_lr is not None:
        groups.append(("critic", [p for p in order if id(p) in critic_ids]))
    return groups


def build_optimizer(
    optimizer: torch.optim.Optimizer,
    actor: nn.Module,
    critic: nn.Module,
    std_lr: float | None,
    critic_lr: float | None = None,
) -> torch.optim.Optimizer:
    """A fresh optimizer of ``optimizer``'s class and hyperparameters with the groups of :func:`group_layout`: ``main``
    (lr = ``optimizer``'s, adapted by the KL schedule), ``std`` (lr = ``std_lr``) and ``critic`` (lr = ``critic_lr``),
    the last two flagged :data:`FIXED_LR_KEY`.

    Raises:
        ValueError: a rate is not > 0, or ``optimizer`` does not hold exactly one group.
    """
    for name, lr in (("std_learning_rate", std_lr), ("critic_learning_rate", critic_lr)):
        if lr is not None and not lr > 0.0:
            raise ValueError(f"train.{name} must be > 0 (or null to disable), got {lr}.")
    if len(optimizer.param_groups) != 1:
        raise ValueError(f"expected rsl_rl's single-group optimizer, got {len(optimizer.param_groups)} groups.")
    defaults = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    rates = {"std": std_lr, "critic": critic_lr}
    groups = []
    for name, params in group_layout(actor, critic, std_lr, critic_lr):
        extra = {} if name == "main" else {"lr": rates[name], FIXED_LR_KEY: True}
        groups.append({"params": params, **defaults, **extra, GROUP_KEY: name})
    return type(optimizer)(groups)


def _saved_layout(groups: list[dict]) -> list[str]:
    """Group names of a saved optimizer state (see :data:`GROUP_KEY`)."""
    if all(GROUP_KEY in g for g in groups):
        return [str(g[GROUP_KEY]) for g in groups]
    return ["main", "std"][: len(groups)] if len(groups) <= 2 else []


def convert_optimizer_state(
    saved: dict, actor: nn.Module, critic: nn.Module, std_lr: float | None, critic_lr: float | None = None
) -> dict:
    """Re-index a saved optimizer ``state_dict`` to the groups of :func:`group_layout` for ``std_lr`` and ``critic_lr``
    (from any of those layouts, rsl_rl's one group included); returned unchanged when it already has them.

    Adam's per-parameter moments move with their parameter; every group takes its own settings of this run.

    Raises:
        ValueError: the saved state's groups or parameter count do not fit the models (the message names the fix).
    """
    groups = saved["param_groups"]
    target = group_layout(actor, critic, std_lr, critic_lr)
    names = _saved_layout(groups)
    if names == [name for name, _ in target]:
        return saved
    n = len(_param_order(actor, critic))
    source_names = set(names)
    if sum(len(g["params"]) for g in groups) != n or not names or not source_names <= {"main", "std", "critic"}:
        raise ValueError(
            f"optimizer state with {len(groups)} group(s) and {sum(len(g['params']) for g in groups)} parameters "
            f"does not fit this model ({n} parameters); load the checkpoint with the train.std_learning_rate and "
            "train.critic_learning_rate settings it was written with, or without its optimizer state."
        )
    source = group_layout(
        actor, critic, 1.0 if "std" in source_names else None, 1.0 if "critic" in source_names else None
    )
    saved_index = {id(p): i for i, p in enumerate(p for _, params in source for p in params)}
    new_index = {id(p): i for i, p in enumerate(p for _, params in target for p in params)}
    remap = {saved_index[k]: new_index[k] for k in saved_index}
    hyper = {k: v for k, v in groups[0].items() if k not in ("params", FIXED_LR_KEY, GROUP_KEY)}
    rates = {"std": std_lr, "critic": critic_lr}
    out = copy.deepcopy(saved)
    out["param_groups"], start = [], 0
    for name, params in target:
        extra = {} if name == "main" else {"lr": rates[name], FIXED_LR_KEY: True}
        indices = list(range(start, start + len(params)))
        out["param_groups"].append({**hyper, **extra, GROUP_KEY: name, "params": indices})
        start += len(params)
    out["state"] = {remap[int(k)]: v for k, v in saved["state"].items()}
    return out


def set_action_std(actor: nn.Module, value: float, optimizer: torch.optim.Optimizer | None = None) -> None:
    """Set every entry of the actor's state-independent action std to ``value`` (``train.resume_std``).

    Works for both of rsl_rl's parameterisations (``std_param`` holds the std, ``log_std_param`` its log). The
    optimizer's state for that parameter (Adam moments) is cleared so that old moments do not push it back.

    Args:
        actor: an actor with a state-independent std (rsl_rl ``GaussianDistribution``).
        value: the new std, in action units (> 0).
        optimizer: the optimizer holding the parameter, or None.

    Raises:
        ValueError: ``value`` is not > 0, or the actor has no state-independent std.
    """
    if not value > 0:
        raise ValueError(f"train.resume_std must be > 0 (an action std), got {value}.")
    found = _find_std(actor)
    if found is None:
        raise ValueError(
            "train.resume_std needs an actor with a state-independent std (rsl_rl GaussianDistribution); "
            f"{type(actor).__name__} has none. Set train.resume_std=null."
        )
    name, param = found
    with torch.no_grad():
        param.fill_(math.log(value) if name == "log_std_param" else value)
    if optimizer is not None:
        optimizer.state.pop(param, None)


def apply_noise_cut(
    alg, completed_iterations: int, iteration: int | None, std: float, entropy_coef: float, applied: bool
) -> bool:
    """The noise cut (``train.noise_cut_*``): once ``completed_iterations`` >= ``iteration``, ``alg.entropy_coef`` is
    ``entropy_coef``, and the first time (``applied`` False: this run's checkpoints do not record the cut) every entry
    of the action std is set to ``std`` (:func:`set_action_std`, Adam moments cleared). A run resumed past the cut
    that had it keeps the std its policy learned since; one that passed the iteration without it (a checkpoint from
    before the setting, or a run stopped between the iteration and the cut) gets the cut at the resume.

    Args:
        alg: rsl_rl's PPO (``actor``, ``optimizer``, ``entropy_coef``).
        completed_iterations: PPO iterations complete in total.
        iteration: the iteration of the cut (the cut follows the update of that iteration, before the next rollout;
            rsl-rl saves that iteration as ``model_<iteration - 1>.pt``), or None (no cut: returns False).
        std: the new action std, action units (> 0).
        entropy_coef: the entropy coefficient from the cut on (>= 0).
        applied: the cut has already set the std in this run.

    Returns:
        True when the std was set now.

    Raises:
        ValueError: ``std`` not > 0 or ``entropy_coef`` < 0 (named as ``train.noise_cut_*``), or an actor without a
            state-independent std.
    """
    if iteration is None or completed_iterations < iteration:
        return False
    problem = noise_cut_problem(iteration, std, entropy_coef)
    if problem:
        raise ValueError(problem)
    alg.entropy_coef = float(entropy_coef)
    if applied:
        return False
    set_action_std(alg.actor, std, alg.optimizer)
    return True
