"""Play a policy or a recording in sim: ``python play.py task=standup policy=<run dir | .pt | .onnx | zero | random>
[viewer=auto|native|video|web] [video=out.mp4] [replay=<.npz | deploy dataset>] [record=out.npz]``.

- ``viewer=native``: MuJoCo's window (needs a display). Keys: Space pause, → step, Backspace reset,
  -/= slower/faster, PageDown/PageUp next/previous posture-terrain variant.
- ``video=out.mp4`` (or ``viewer=video``): headless MP4 (EGL or OSMesa), camera tracking the robot.
- ``viewer=web``: viser in the browser (scene, play/pause/step/reset, live reward-group and head-height plots);
  ``web.port=8080``, JSON status at ``http://<host>:<port+1>/status``. It listens on 127.0.0.1 only;
  ``web.host=0.0.0.0`` (alias ``viewer.host=0.0.0.0``) opens it to other machines, with a warning: it has no
  authentication.
- ``viewer=auto`` (default): native when DISPLAY or WAYLAND_DISPLAY is set, else web.

Evaluation settings: one env, β fixed (``beta=``, default ``env.curriculum.beta_init``), randomisation off
(``randomize=true`` keeps it). A VLA on task=lift (TinyVLA folder, VLA ``.onnx``, residual run) plays with
``instruction="lift the red cube"``. Other keys: ``episodes``, ``duration``, ``speed``, ``variant``, ``seed``,
``render.*``, ``web.*``, and every task key (``env.*``, ``sim.*``, ``train.*``) as for train.py.
"""

from __future__ import annotations

import sys

from upright.gl import choose_offscreen_gl

if any(a.startswith("video=") or a == "viewer=video" for a in sys.argv[1:]):
    choose_offscreen_gl()  # before MuJoCo is imported (it reads MUJOCO_GL once): EGL, else OSMesa

import hydra
from omegaconf import DictConfig

from upright.conf.validate import validate_overrides
from upright.viewer.config import register_play_config

register_play_config()


@hydra.main(version_base=None, config_name="play")
def main(cfg: DictConfig) -> None:
    from upright.viewer.cli import PlayError, play

    try:
        sys.exit(play(cfg))
    except PlayError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(2)


WEB_ALIASES = {"viewer.host=": "web.host=", "viewer.port=": "web.port=", "viewer.status_port=": "web.status_port="}
"""``viewer.host=0.0.0.0`` reads naturally next to ``viewer=web``; the keys live under ``web.``."""


def apply_aliases(args: list[str]) -> list[str]:
    """``viewer.host=X`` -> ``web.host=X`` (and ``port``, ``status_port``); other arguments unchanged."""
    out = []
    for a in args:
        for alias, key in WEB_ALIASES.items():
            if a.startswith(alias):
                a = key + a[len(alias) :]
        out.append(a)
    return out


if __name__ == "__main__":
    sys.argv[1:] = apply_aliases(sys.argv[1:])
    error = validate_overrides(sys.argv[1:], config_name="play")
    if error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2)
    from upright.conf import with_task_groups
    from upright.conf.validate import split_hydra_flags

    overrides, hydra_flags = split_hydra_flags(sys.argv[1:])  # --cfg job, --help: Hydra reads them after the overrides
    sys.argv[1:] = [*with_task_groups(overrides), "hydra.run.dir=.", "hydra.output_subdir=null", *hydra_flags]
    main()
