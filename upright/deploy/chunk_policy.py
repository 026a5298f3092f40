"""Loading a chunked (VLA) policy for the daemon, and its contract with the robot.

``upright-deploy run --policy SOURCE`` takes a chunked policy when SOURCE is

- a VLA ``.onnx`` file (it carries upright's VLA metadata, :mod:`upright.vla.onnx_policy`), run with onnxruntime;
- a TinyVLA folder (``model.pt``, else ``policy.onnx``, of ``python -m upright.vla.train_bc``) or ``model.pt``;
- ``ws://HOST:PORT``: an openpi-protocol policy server (``upright-policy-server``, openpi's ``serve_policy.py``),
  through :class:`~upright.vla.remote.RemotePolicy`.

The VLA metadata says what the policy reads and outputs (state dim and names, cameras, chunk size H, action dim,
action convention), not how to drive the robot. That is the deploy contract,
:data:`~upright.policy_io.schema.CHUNK_CONTRACT_KEYS` (joints in action order, Kp/Kd, default pose, action mode
and scale, control dt): embedded in the policy (``train_bc --deploy-contract lift``: top-level ONNX metadata keys,
``model.pt``'s ``config.extra.deploy_contract``) and/or given as a JSON file (``--policy-contract FILE``, required
for a remote policy; its keys win). A missing key is refused in one line naming the fix.

Observation. The daemon builds ``observation.state`` (1, 2J + 6) float32 from the reading, in the layout of the
lift demonstrations (:func:`upright.tasks.lift.vla_io.proprio_state`) and of the daemon's own datasets: q and
dq of the policy joints in policy-joint order (rad or m, rad/s or m/s), the IMU gyro (3, rad/s, body frame) and the
projected gravity (3). In :class:`~upright.policy_io.spec.PolicySpec` terms: the shared observation terms
``joint_pos``, ``joint_vel``, ``base_ang_vel``, ``projected_gravity`` at scale 1, no history, no clip.

Cameras. The spec's ``metadata`` carries the policy's ``cameras`` (names, ``observation.images.<name>``) and
``image_size`` (H, W) px, from its metadata (TinyVLA config, VLA ONNX keys ``image_height``/``image_width``; a remote
server's metadata may lack the size: ``upright-deploy run --image-size HxW``). The daemon feeds them from
``--camera NAME=SOURCE`` sources (:mod:`upright.deploy.camera`); :func:`check_camera_sources` refuses a policy whose
cameras are not all covered.
"""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import numpy as np

from upright.deploy.metadata import check_joints_match_robot
from upright.deploy.robot_config import RobotConfig
from upright.policy_io.schema import CHUNK_ACTION_MODES, CHUNK_CONTRACT_KEYS, PolicyMetadataError
from upright.policy_io.spec import PolicySpec, joint_floats, positive_number

CHUNK_OBSERVATION_TERMS = ("joint_pos", "joint_vel", "base_ang_vel", "projected_gravity")
"""The shared observation terms that make ``observation.state`` (module docstring), in order."""

CONTRACT_HINT = (
    "export the VLA with `python -m upright.vla.train_bc ... --deploy-contract lift` (or a contract "
    "JSON), or pass `--policy-contract FILE.json` (docs/deploy_chunked.md)"
)
"""How to fix a policy without a complete deploy contract (appended to the one-line refusal)."""

CONVENTION_MODES = {"delta": ("delta",), "absolute": ("absolute", "relative")}
"""The daemon's action modes that fit each VLA ``action_convention`` (:mod:`upright.vla.policy`)."""


def _has_vla_metadata(path: pathlib.Path) -> bool:
    from upright.policy_io import onnx_info

    try:
        keys = set(onnx_info.read(path).metadata)
    except (OSError, onnx_info.OnnxFileError):  # not readable as ONNX: not a VLA file (the MLP loader says why)
        return False
    return "upright_vla_metadata_version" in keys


def is_chunk_policy_source(source: str) -> bool:
    """Whether ``--policy SOURCE`` names a chunked policy (module docstring) rather than an MLP policy file: a
    ``ws://`` address, a ``.pt`` file, a folder with ``model.pt`` or a VLA ``policy.onnx``, or an ``.onnx`` file with
    upright's VLA metadata."""
    if source.startswith(("ws://", "wss://")):
        return True
    path = pathlib.Path(source)
    if path.is_dir():
        return (path / "model.pt").is_file() or _has_vla_metadata(path / "policy.onnx")
    if path.suffix == ".pt":
        return True
    return path.suffix == ".onnx" and path.is_file() and _has_vla_metadata(path)


def state_names(joint_names: tuple[str, ...] | list[str]) -> list[str]:
    """The names of the 2J + 6 ``observation.state`` entries (those of the daemon's and the demonstrations' datasets,
    :func:`upright.dataset_io.records.frame_features`)."""
    from upright.dataset_io.records import frame_features

    return list(frame_features(tuple(joint_names), [])["observation.state"]["names"])


def _remote(source: str, contract: dict, timeout: float):
    from upright.vla.remote import RemotePolicy

    address = source.split("://", 1)[1].rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise PolicyMetadataError(f"--policy {source}: expected ws://HOST:PORT")
    joints = contract.get("joint_names")
    chunk = contract.get("chunk_size")
    return RemotePolicy(
        host,
        int(port),
        chunk_size=None if chunk is None else int(chunk),
        action_dim=None if joints is None else len(joints),
        timeout=timeout,
    )


def _describe(policy) -> dict[str, Any]:
    """What a loaded ChunkPolicy says about itself: cameras, state dim/names, action names, embedded contract."""
    meta = getattr(policy, "metadata", None)
    cfg = getattr(policy, "cfg", None)
    if cfg is not None and hasattr(cfg, "extra"):  # TinyVLA
        return {
            "cameras": list(cfg.cameras),
            "state_dim": cfg.state_dim,
            "state_names": list(cfg.state_names),
            "action_names": list(cfg.action_names),
            "control_dt": cfg.control_dt,
            "image_size": [int(cfg.image_height), int(cfg.image_width)],
            "contract": dict(cfg.extra.get("deploy_contract") or {}),
        }
    meta = dict(meta or {})
    contract = {
        k: meta[k]
        for k in (
            *CHUNK_CONTRACT_KEYS,
            "action_clip",
            "held_joint_names",
            "held_kp",
            "held_kd",
            "held_joint_pos",
            "task",
        )
        if k in meta
    }
    if "upright_vla_metadata_version" not in meta:  # a remote server's metadata: no contract inside
        contract = {}
    size = [meta["image_height"], meta["image_width"]] if "image_height" in meta and "image_width" in meta else None
    return {
        "cameras": list(meta.get("cameras") or getattr(policy, "cameras", ()) or ()),
        "state_dim": meta.get("state_dim"),
        "state_names": list(meta.get("state_names") or []),
        "action_names": list(meta.get("action_names") or []),
        "control_dt": meta.get("control_dt"),
        "image_size": None if size is None else [int(v) for v in size],
        "contract": contract,
    }


def load_chunk_policy(
    source: str,
    robot: RobotConfig | None = None,
    contract_file: str | None = None,
    task: str | None = None,
    timeout: float = 30.0,
) -> tuple[PolicySpec, Any]:
    """Load the chunked policy ``source`` and build the controller's :class:`PolicySpec` from its deploy contract.

    Args:
        source: a VLA ``.onnx``, a TinyVLA folder or ``model.pt``, or ``ws://HOST:PORT`` (module docstring).
        robot: check the joints against it (as :func:`~upright.deploy.metadata.check_joints_match_robot`).
        contract_file: JSON of :data:`~upright.policy_io.schema.CHUNK_CONTRACT_KEYS` (and optional keys); wins
            over the embedded contract; required for ``ws://`` (the server's metadata has none).
        task: the instruction, stored as the spec's ``task`` (default: the contract's ``task``).
        timeout: seconds to connect to and wait for a remote server.

    Returns:
        The spec (observation terms of ``observation.state``, history 1, the contract's action rule) and the
        :class:`~upright.vla.policy.ChunkPolicy`.

    Raises:
        PolicyMetadataError: one line naming the fix: a missing contract key, an unknown action mode, an action mode
            that contradicts the policy's action convention, a state or action layout the daemon does not build,
            joints that do not match the robot, or a policy that cannot be loaded.
    """
    extra: dict = {}
    if contract_file:
        try:
            extra = json.loads(pathlib.Path(contract_file).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise PolicyMetadataError(f"--policy-contract {contract_file}: cannot read it as JSON ({err})") from None
        if not isinstance(extra, dict):
            raise PolicyMetadataError(f"--policy-contract {contract_file}: expected a JSON object of the contract keys")
    try:
        if source.startswith(("ws://", "wss://")):
            policy = _remote(source, extra, timeout)
        else:
            from upright.vla.evaluate_lift import load_chunk_policy as load_vla

            policy, _ = load_vla(source)
    except (OSError, ValueError) as err:  # FileNotFoundError, ConnectionError, VLAMetadataError
        raise PolicyMetadataError(f"--policy {source}: {str(err).splitlines()[0]}") from None
    facts = _describe(policy)
    contract = {**facts["contract"], **extra}
    try:
        spec = _spec(source, contract, facts, policy, task)
        if robot is not None:
            check_joints_match_robot(spec, robot)
    except BaseException:
        if hasattr(policy, "close"):
            policy.close()
        raise
    return spec, policy


def _spec(source: str, contract: dict, facts: dict, policy, task: str | None) -> PolicySpec:
    missing = [k for k in CHUNK_CONTRACT_KEYS if k not in contract]
    if missing:
        raise PolicyMetadataError(f"{source}: the chunked policy's deploy contract lacks {missing}; {CONTRACT_HINT}")
    joints = tuple(str(j) for j in contract["joint_names"])
    n = len(joints)
    if n == 0 or len(set(joints)) != n:
        raise PolicyMetadataError(f"{source}: contract joint_names must be non-empty and unique")
    mode = str(contract["action_mode"])
    if mode not in CHUNK_ACTION_MODES:
        raise PolicyMetadataError(
            f"{source}: contract action_mode {mode!r} is not one the daemon runs "
            f"{list(CHUNK_ACTION_MODES)}; {CONTRACT_HINT}"
        )
    convention = getattr(policy, "action_convention", None)
    if convention in CONVENTION_MODES and mode not in CONVENTION_MODES[convention]:
        raise PolicyMetadataError(
            f"{source}: the policy's action_convention is {convention!r} but the contract says "
            f"action_mode {mode!r} (use {' or '.join(CONVENTION_MODES[convention])})"
        )
    if int(policy.action_dim) != n:
        raise PolicyMetadataError(
            f"{source}: the policy outputs {policy.action_dim} actions, the contract names {n} joints {list(joints)}"
        )
    if facts["action_names"] and list(facts["action_names"]) != list(joints):
        raise PolicyMetadataError(
            f"{source}: the policy's action_names {facts['action_names']} are not the contract's "
            f"joint_names {list(joints)}"
        )
    want = state_names(joints)
    if facts["state_dim"] is not None and int(facts["state_dim"]) != len(want):
        raise PolicyMetadataError(
            f"{source} reads a {facts['state_dim']}-value observation.state, the daemon builds {len(want)} "
            f"(q, dq of {n} joints, gyro, gravity: record_demos' observation.state); a policy trained on "
            "observation.policy_obs needs the cube's position, which the robot does not measure"
        )
    if facts["state_names"] and list(facts["state_names"]) != want:
        raise PolicyMetadataError(
            f"{source}: the policy's state_names {facts['state_names'][:3]}... are not the "
            f"daemon's observation.state layout {want[:3]}... (docs/deploy_chunked.md)"
        )
    control_dt = positive_number("control_dt", contract["control_dt"], source)
    if facts["control_dt"] is not None and abs(float(facts["control_dt"]) - control_dt) > 1e-9:
        raise PolicyMetadataError(
            f"{source}: the contract's control_dt {control_dt} s differs from the policy's "
            f"{facts['control_dt']} s (its training data's 1/fps)"
        )
    held = tuple(str(j) for j in contract.get("held_joint_names", []))
    nh = len(held)
    spec = PolicySpec(
        path=source,
        task=str(task or contract.get("task") or "chunked policy"),
        joint_names=joints,
        kp=joint_floats(contract, "kp", n, source),
        kd=joint_floats(contract, "kd", n, source),
        default_joint_pos=joint_floats(contract, "default_joint_pos", n, source),
        held_joint_names=held,
        held_kp=joint_floats(contract, "held_kp", nh, source) if nh else np.zeros(0),
        held_kd=joint_floats(contract, "held_kd", nh, source) if nh else np.zeros(0),
        held_joint_pos=joint_floats(contract, "held_joint_pos", nh, source) if nh else np.zeros(0),
        action_mode=mode,
        action_scale=positive_number("action_scale", contract["action_scale"], source),
        action_clip=positive_number("action_clip", contract.get("action_clip", math.inf), source, allow_inf=True),
        control_dt=control_dt,
        observation_names=CHUNK_OBSERVATION_TERMS,
        observation_dims=(n, n, 3, 3),
        observation_scales=(1.0, 1.0, 1.0, 1.0),
        history_length=1,
        observation_clip=math.inf,
        input_name="observation.state",
        output_name="action_chunk",
        metadata={
            **contract,
            "policy_kind": "chunked",
            "chunk_size": int(policy.chunk_size),
            "cameras": [str(c) for c in facts["cameras"]],
            "image_size": facts.get("image_size"),
        },
    )
    if np.any(spec.kp < 0) or np.any(spec.kd < 0) or np.any(spec.held_kp < 0) or np.any(spec.held_kd < 0):
        raise PolicyMetadataError(f"{source}: negative Kp or Kd in the deploy contract")
    return spec


def check_camera_sources(
    spec: PolicySpec, given: dict[str, str], image_size: tuple[int, int] | None = None
) -> tuple[int, int] | None:
    """Check ``--camera NAME=SOURCE`` (``given``: name -> source) against the policy's cameras; return the image size
    (H, W) the sources must deliver (None: the policy reads no camera).

    Args:
        spec: from :func:`load_chunk_policy` (``metadata["cameras"]``, ``metadata["image_size"]``), or an MLP spec.
        given: the parsed ``--camera`` items.
        image_size: ``--image-size`` (wins over the policy's).

    Raises:
        PolicyMetadataError: one line naming the fix: a camera of the policy without a source (naming
            ``--camera NAME=...``), a source for a camera the policy does not read, or no known image size.
    """
    cams = list(spec.metadata.get("cameras") or [])
    missing = [c for c in cams if c not in given]
    if missing:
        example = " ".join(f"--camera {c}=sim" for c in missing)
        raise PolicyMetadataError(
            f"{spec.path} reads cameras {cams}; no source for {missing}: add {example} "
            f"(sim-robot's) or --camera {missing[0]}=/dev/videoN"
        )
    extra = [c for c in given if c not in cams]
    if extra:
        raise PolicyMetadataError(
            f"--camera {extra[0]}: {spec.path} does not read camera {extra[0]!r} (its cameras: "
            f"{cams or 'none'}); drop it"
        )
    if not cams:
        return None
    size = image_size or spec.metadata.get("image_size")
    if not size:
        raise PolicyMetadataError(
            f"{spec.path} reads cameras {cams} but does not say their size: give --image-size HxW"
        )
    return int(size[0]), int(size[1])
