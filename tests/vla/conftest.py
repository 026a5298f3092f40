"""A tiny recorded lift dataset shared by the VLA tests: 2 expert episodes of 25 steps (0.5 s) from 2 envs, two
instructions, with a 64 x 64 front camera where offscreen OpenGL works (else without images)."""

from __future__ import annotations

import pytest

INSTRUCTIONS = ("Pick up the green cube.", "Lift the block to the red target!")
EPISODE_STEPS = 25


def _gl_works() -> bool:
    from upright.gl import gl_backend_works

    return any(gl_backend_works(name) for name in ("egl", "osmesa"))


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """``{"root", "cameras", "steps", "instructions"}``: the dataset folder, the cameras it holds (("front",) or ()),
    frames per episode and the instructions (episode k has ``instructions[k]``)."""
    from upright.training.record_demos import record

    root = tmp_path_factory.mktemp("vla") / "demos"
    cameras = _gl_works()
    overrides = [
        "sim.num_threads=1",
        f"env.episode_length_s={EPISODE_STEPS * 0.02}",
        "env.camera.width=64",
        "env.camera.height=64",
    ]
    summary = record(
        root, episodes=2, num_envs=2, seed=3, cameras=cameras, overrides=overrides, instructions=INSTRUCTIONS
    )
    assert summary["episodes"] == 2 and summary["frames"] == 2 * EPISODE_STEPS, summary
    return {
        "root": root,
        "cameras": ("front",) if cameras else (),
        "steps": EPISODE_STEPS,
        "instructions": INSTRUCTIONS,
    }
