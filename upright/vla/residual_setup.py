"""Setting up and finishing residual training (:mod:`upright.vla.residual`): the run's copy of the base and its
checksum record (``base_checksum.json``), the wrapped env, and the residual's ONNX metadata."""

from __future__ import annotations

import json
import pathlib
import shutil

from upright.policy_io.residual_base import ResidualCfg, is_remote_base, resolve_base_file
from upright.vla.checksums import file_sha256, parameters_sha256
from upright.vla.residual import REMOTE_BASE_NOTE, remote_base_sha256
from upright.vla.residual_env import BASE_ACTION_TERM, ResidualEnv


def residual_metadata(env_metadata: dict, base_info: dict, cfg: ResidualCfg, action_dim: int) -> dict:
    """The residual policy's ONNX metadata: the env's, with the base action appended to the observation and the
    residual's keys (``policy_type`` ``"residual"``, ``residual_alpha``, ``residual_formula``,
    ``residual_instruction``) and the base's record from :func:`setup_residual` (``base_info``): for a file base
    ``residual_base_file`` and ``residual_base_sha256`` (its bytes); for a remote base ``residual_base_url``,
    ``residual_base_metadata_sha256`` (:func:`remote_base_sha256`), ``residual_base_weights_sha256`` (when the server
    sends one) and ``residual_base_note``."""
    from upright.tasks.lift.vla_io import TASK

    meta = dict(env_metadata)
    meta["observation_dim"] = int(env_metadata["observation_dim"]) + action_dim
    meta["observation_suffix"] = [BASE_ACTION_TERM, action_dim]
    meta["observation_suffix_description"] = (
        "after the env observation: the base policy's action of this step "
        "(dimensionless, [-1, 1], lift delta convention)"
    )
    meta["policy_type"] = "residual"
    if "base_url" in base_info:
        meta["residual_base_url"] = base_info["base_url"]
        meta["residual_base_metadata_sha256"] = base_info["base_metadata_sha256"]
        if base_info.get("base_weights_sha256"):
            meta["residual_base_weights_sha256"] = base_info["base_weights_sha256"]
        meta["residual_base_note"] = REMOTE_BASE_NOTE
    else:
        meta["residual_base_file"] = base_info["base_file"]
        meta["residual_base_sha256"] = base_info["base_sha256"]
    meta["residual_alpha"] = float(cfg.alpha)
    meta["residual_formula"] = (
        "action = clip(base_action + residual_alpha * clip(output, -1, 1), -action_clip, action_clip)"
    )
    meta["residual_instruction"] = cfg.instruction or TASK
    return meta


def setup_residual(env, cfg: ResidualCfg, run_dir: pathlib.Path, steps_per_iteration: int) -> tuple[ResidualEnv, dict]:
    """Load the base, copy its file into ``run_dir`` (``base_policy.onnx`` / ``base_model.pt``), record its checksums
    in ``run_dir/base_checksum.json`` and wrap ``env``. Returns the wrapped env and the base's record for
    :func:`residual_metadata` (``base_file``, ``base_sha256``). A remote base (``ws://``) goes to
    :func:`_setup_remote` (no file; the server's metadata is the record).

    Raises:
        FileNotFoundError: no base at ``cfg.base``.
        ValueError: the base file does not match the run's copy of it (a resumed run given another base), or the
            base cannot drive this env (:class:`ResidualEnv`).
        ConnectionError: no policy server at a ``ws://`` base.
    """
    from upright.vla.evaluate_lift import load_chunk_policy

    if is_remote_base(cfg.base):
        return _setup_remote(env, cfg, run_dir, steps_per_iteration)
    src = resolve_base_file(cfg.base)
    dst = run_dir / ("base_policy.onnx" if src.suffix == ".onnx" else "base_model.pt")
    sha = file_sha256(src)
    record_path = run_dir / "base_checksum.json"
    if record_path.is_file():  # resuming: the base must be the one the residual was trained on
        record = json.loads(record_path.read_text())
        if record.get("file_sha256") != sha:
            was = str(record.get("file_sha256"))[:12]
            raise ValueError(
                f"policy.base={cfg.base} is not the base this run was trained on (SHA-256 "
                f"{sha[:12]} != {was}); resume with the same base"
            )
    elif src.resolve() != dst.resolve():
        shutil.copyfile(src, dst)
    base, spec = load_chunk_policy(dst if dst.is_file() else src)
    if src.suffix != ".onnx":  # a TinyVLA checkpoint next to its exported graph: keep the graph for deployment
        onnx_src = src.parent / "policy.onnx"
        if onnx_src.is_file() and not (run_dir / "base_policy.onnx").exists():
            shutil.copyfile(onnx_src, run_dir / "base_policy.onnx")
    if hasattr(base, "eval"):
        base.eval()
    for p in getattr(base, "parameters", lambda: [])():
        p.requires_grad_(False)
    if not record_path.is_file():
        record = {"base": str(cfg.base), "file_sha256": sha, "parameters_sha256_start": parameters_sha256(base)}
        record_path.write_text(json.dumps(record, indent=1) + "\n")
    wrapped = ResidualEnv(env, base, spec, cfg, steps_per_iteration)
    return wrapped, {"base_file": dst.name, "base_sha256": sha}


def _setup_remote(env, cfg: ResidualCfg, run_dir: pathlib.Path, steps_per_iteration: int) -> tuple[ResidualEnv, dict]:
    """:func:`setup_residual` for ``policy.base=ws://HOST:PORT``: connect, record the URL and the server's metadata
    and its :func:`remote_base_sha256` in ``base_checksum.json`` (``remote``: true), wrap ``env``. Returns
    ``base_url``, ``base_metadata_sha256`` and ``base_weights_sha256`` (None when the server sends none).

    Raises:
        ConnectionError: no server at the address.
        ValueError: a resumed run whose record names another server metadata, or a base that cannot drive this env.
    """
    from upright.vla.checksums import jsonable
    from upright.vla.evaluate_lift import load_chunk_policy

    base, spec = load_chunk_policy(cfg.base)
    sha = remote_base_sha256(base.metadata)
    record_path = run_dir / "base_checksum.json"
    try:
        if record_path.is_file():  # resuming: the server must serve the policy the residual was trained on
            record = json.loads(record_path.read_text())
            if record.get("server_metadata_sha256") != sha:
                raise ValueError(
                    f"policy.base={cfg.base} serves another policy than this run was trained on (server "
                    f"metadata SHA-256 {sha[:12]} != {str(record.get('server_metadata_sha256'))[:12]}); "
                    "resume with the same server and policy"
                )
        else:
            record = {
                "base": cfg.base,
                "remote": True,
                "server_metadata": jsonable(base.metadata),
                "server_metadata_sha256": sha,
                "weights_sha256_start": base.metadata.get("weights_sha256"),
                "note": REMOTE_BASE_NOTE,
            }
            record_path.write_text(json.dumps(record, indent=1) + "\n")
        wrapped = ResidualEnv(env, base, spec, cfg, steps_per_iteration)
    except Exception:
        base.close()
        raise
    return wrapped, {
        "base_url": cfg.base,
        "base_metadata_sha256": sha,
        "base_weights_sha256": base.metadata.get("weights_sha256"),
    }


def check_base_answers(base: str, timeout: float = 10.0) -> None:
    """A remote base (``ws://`` / ``wss://``, :func:`upright.policy_io.residual_base.is_remote_base`) must answer with
    its metadata now, before a run folder is made (``train.py`` calls this); a local base is checked by the override
    validation (:func:`upright.conf.validate.check_values`).

    Raises:
        ValueError: the server does not answer within ``timeout`` s (one line naming how to start it).
    """
    from upright.policy_io.residual_base import is_remote_base
    from upright.vla.remote import fetch_metadata

    if not is_remote_base(base):
        return
    try:
        fetch_metadata(base, timeout=timeout)
    except ConnectionError as err:
        raise ValueError(
            f"policy.base={base}: {err}; start it with upright-policy-server --policy <base> --port <port>"
        ) from None


def finish_residual(env: ResidualEnv, run_dir: pathlib.Path) -> dict:
    """Record the base's checksums after training in ``base_checksum.json`` and check them against the start. A
    remote base: its server's metadata is fetched again (a new connection) and hashed; a server that no longer answers
    is recorded as unchecked (``unchanged``: null) rather than raised, so that it does not hide the error that ended
    training.

    Raises:
        RuntimeError: the base's weights (or a remote base's server metadata) changed during training (they must
            stay frozen).
    """
    record_path = run_dir / "base_checksum.json"
    record = json.loads(record_path.read_text())
    if record.get("remote"):
        from upright.vla.remote import fetch_metadata

        try:
            meta = fetch_metadata(record["base"])
        except (ConnectionError, ValueError) as e:
            record["server_metadata_sha256_end"], record["unchanged"] = None, None
            record["unchecked_reason"] = str(e)
        else:
            record["server_metadata_sha256_end"] = remote_base_sha256(meta)
            record["weights_sha256_end"] = meta.get("weights_sha256")
            record["unchanged"] = record["server_metadata_sha256_end"] == record["server_metadata_sha256"]
        record_path.write_text(json.dumps(record, indent=1) + "\n")
        if record["unchanged"] is False:
            raise RuntimeError(f"the remote base's server metadata changed during residual training ({record_path})")
        return record
    record["parameters_sha256_end"] = parameters_sha256(env.base)
    record["file_sha256_end"] = file_sha256(resolve_base_file(record["base"]))
    record["unchanged"] = (
        record["parameters_sha256_end"] == record["parameters_sha256_start"]
        and record["file_sha256_end"] == record["file_sha256"]
    )
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    if not record["unchanged"]:
        raise RuntimeError(f"the base policy's weights changed during residual training ({record_path})")
    return record


def describe_record(record: dict) -> str:
    """One line on a ``base_checksum.json`` record after :func:`finish_residual` (train.py prints it)."""
    if record.get("remote"):
        if record.get("unchanged") is None:
            return (
                f"Remote base {record['base']} NOT checked at the end ({record.get('unchecked_reason')}); "
                f"{REMOTE_BASE_NOTE}"
            )
        return (
            f"Base policy unchanged: server {record['base']} metadata SHA-256 "
            f"{record['server_metadata_sha256'][:16]}... (weights {str(record.get('weights_sha256_end'))[:16]}...;"
            f" {REMOTE_BASE_NOTE})"
        )
    return (
        f"Base policy unchanged: file SHA-256 {record['file_sha256'][:16]}..., parameters "
        f"{str(record['parameters_sha256_end'])[:16]}..."
    )
