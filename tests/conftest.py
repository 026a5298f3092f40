"""Test-session set-up: choose the offscreen OpenGL backend before any test module imports MuJoCo.

MuJoCo reads ``MUJOCO_GL`` once, at its first import. ``import upright`` (and ``gymnasium.make`` of an upright id)
chooses EGL or OSMesa on a headless machine when it is the first to import MuJoCo; in one pytest process many test
modules import MuJoCo first, so the choice is made here, as a user's process that imports upright first gets it.
"""

from upright.gl import choose_offscreen_gl

choose_offscreen_gl()
