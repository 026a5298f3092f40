"""Start a new run's actor from an exported upright policy file (``train.init_policy``).

What it is for: fine-tuning a policy when only its ``policy.onnx`` is at hand (a committed or deployed policy whose
training checkpoint is gone; checkpoints live in ``logs/``, which a machine does not keep). The file holds the actor's
deterministic path, the observation normaliser (mean, std + eps) and the Linear layers of the MLP. It does not hold the
action std (``train.init_noise_std`` sets it), the critic, the optimizer state or the env's curricula: the critic starts
fresh, so a run started this way first trains the critic alone (``train.critic_warmup_iterations``).

The file must describe the env being trained (the contract keys of :data:`upright.training.export.CONTRACT_KEYS` and
the action mode agree) and its graph must be what upright's exporter writes for this actor: ``Sub(mean)``,
``Div(std + eps)``, then the MLP's ``Gemm`` layers (initialisers named ``mlp.<i>.weight`` / ``mlp.<i>.bias``, the
actor's own parameter names). After loading, onnxruntime and the torch actor are run on the same inputs and must
agree to 1e-4, so a graph that only looks right is refused too.
"""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import torch

NORMALIZER_COUNT = 10**8
"""Sample count given to the loaded observation normaliser (rsl-rl ``EmpiricalNormalization.count``): each update
then moves its statistics by batch / count, as in a run that has seen 1e8 samples (the committed get-up policy saw
1.3e8 env steps), instead of letting the first fine-tuning batch replace them."""


def _fail(path: pathlib.Path, why: str) -> ValueError:
    return ValueError(
        f"train.init_policy={path}: {why}; give a policy.onnx exported by upright for this task and recipe "
        "(python -m upright.training.export), or train.init_policy=null"
    )


def _initializers(model) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}


def _normalizer_arrays(model, inits: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(mean, std + eps) from the graph's first ``Sub`` and ``Div`` nodes whose second input is an initialiser."""
    found = {}
    for node in model.graph.node:
        if node.op_type in ("Sub", "Div") and node.op_type not in found and node.input[1] in inits:
            found[node.op_type] = inits[node.input[1]]
    if set(found) != {"Sub", "Div"}:
        return None
    return found["Sub"], found["Div"]


def load_actor_from_onnx(actor: torch.nn.Module, path: str | pathlib.Path, env_metadata: dict[str, Any]) -> dict:
    """Copy the MLP weights and observation normaliser of the exported policy ``path`` into ``actor`` (in place).

    Args:
        actor: rsl-rl ``MLPModel`` (or :class:`~upright.training.multi_critic_model.TanhActorModel`) with an
            ``EmpiricalNormalization`` (``train.obs_normalization=true``); its std is left as it is.
        path: the ``.onnx`` file.
        env_metadata: the metadata this run exports (``upright.tasks.registry.policy_metadata``): the file's contract
            keys must equal it.

    Returns:
        ``{"iteration": <the file's iteration or None>, "max_abs_error": <onnxruntime vs torch on 64 inputs>}``.

    Raises:
        ValueError: no such file, not a readable upright policy, another env's contract, a graph or layer shape that
            is not this actor's, or onnxruntime and the loaded actor disagree (one line, naming the fix).
    """
    import onnx

    from upright.policy_io.schema import PolicyMetadataError, read_raw_metadata
    from upright.policy_io.session import one_line, open_session
    from upright.training.export import contract_mismatch

    path = pathlib.Path(path)
    try:
        meta = read_raw_metadata(path)
    except PolicyMetadataError as err:
        raise _fail(path, one_line(err)) from err
    for key in ("action_mode", "action_scale"):
        if key not in meta:
            raise _fail(path, f"its metadata has no {key!r} (not a policy file upright exported)")
    problem = contract_mismatch(meta, env_metadata, require_all=True)
    if problem:
        frames = meta.get("observation_history_length")
        if meta.get("mdp") == "getup" and frames != env_metadata.get("observation_history_length"):
            problem += f"; its actor reads {frames} frames: set env.getup.actor_history={frames}"
        raise _fail(path, f"it was trained for another env ({problem})")
    if meta["action_mode"] != env_metadata["action_mode"]:
        raise _fail(path, f"action_mode {meta['action_mode']!r} but this env's is {env_metadata['action_mode']!r}")
    if not np.isclose(float(meta["action_scale"]), float(env_metadata["action_scale"]), rtol=1e-4):
        raise _fail(path, f"action_scale {meta['action_scale']} but this env's is {env_metadata['action_scale']}")

    model = onnx.load(str(path))
    inits = _initializers(model)
    norm = getattr(actor, "obs_normalizer", None)
    if not hasattr(norm, "_mean"):
        raise ValueError("train.init_policy needs the actor's observation normaliser: set train.obs_normalization=true")
    arrays = _normalizer_arrays(model, inits)
    if arrays is None:
        raise _fail(path, "its graph has no observation normaliser (Sub mean, Div std)")
    mlp_state = actor.mlp.state_dict()
    missing = [f"mlp.{k}" for k in mlp_state if f"mlp.{k}" not in inits]
    if missing:
        raise _fail(path, f"its graph lacks the actor layers {missing[:3]}")
    wrong = [
        f"mlp.{k} {tuple(inits[f'mlp.{k}'].shape)} vs {tuple(v.shape)}"
        for k, v in mlp_state.items()
        if tuple(inits[f"mlp.{k}"].shape) != tuple(v.shape)
    ]
    if wrong:
        raise _fail(path, f"layer shapes differ from this actor's (train.actor_hidden_dims): {wrong[0]}")
    mean, std_eps = (np.array(a, np.float32).reshape(1, -1) for a in arrays)
    if mean.shape != tuple(norm._mean.shape) or std_eps.shape != tuple(norm._mean.shape):
        raise _fail(path, f"normaliser width {mean.shape[1]} but the actor's input is {norm._mean.shape[1]}")
    std = std_eps - float(norm.eps)
    if not np.all(std > 0):
        raise _fail(path, "its normaliser std is not positive")
    with torch.no_grad():
        actor.mlp.load_state_dict({k: torch.from_numpy(np.array(inits[f"mlp.{k}"])) for k in mlp_state})
        norm._mean.copy_(torch.as_tensor(mean))
        norm._std.copy_(torch.as_tensor(std))
        norm._var.copy_(torch.as_tensor(std) ** 2)
        norm.count.fill_(NORMALIZER_COUNT)

    session = open_session(path, fix="re-export it with python -m upright.training.export")
    x = torch.as_tensor(mean) + torch.as_tensor(std) * torch.randn(
        64, mean.shape[1], generator=torch.Generator().manual_seed(0)
    )
    policy = actor.as_onnx(verbose=False).to("cpu").eval()
    with torch.no_grad():
        expected = policy(x).numpy()
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise _fail(path, f"its graph has {len(inputs)} inputs, not one observation")
    rows = x.numpy().astype(np.float32)
    if inputs[0].shape and inputs[0].shape[0] == 1:  # rsl-rl's batch-1 export (the daemon's files): a row per call
        got = np.concatenate([session.run(None, {inputs[0].name: row[None]})[0] for row in rows])
    else:
        got = session.run(None, {inputs[0].name: rows})[0]
    err = float(np.max(np.abs(got.reshape(expected.shape) - expected))) if got.size == expected.size else np.inf
    if not err <= 1e-4:
        raise _fail(path, f"onnxruntime and the loaded actor disagree (max |difference| {err:.3g})")
    iteration = meta.get("iteration")
    return {"iteration": int(iteration) if iteration is not None else None, "max_abs_error": err}
