"""Pick MuJoCo's OpenGL backend for offscreen rendering before ``mujoco`` is imported.

MuJoCo reads ``MUJOCO_GL`` once, when it is imported. With a display (``DISPLAY`` or
``WAYLAND_DISPLAY``) the default (GLFW) renders offscreen too. Without one, :func:`choose_offscreen_gl`
tries EGL, then OSMesa, each in a throw-away subprocess (a failing GL backend can abort the process),
and sets ``MUJOCO_GL`` to the first that creates a context. Debian packages: EGL comes with
``libegl1`` + ``libegl-mesa0`` (Mesa's software or a GPU driver), OSMesa with ``libosmesa6``.

It sits on the package's ground floor (standard library only) because every floor that renders calls it first: the
task cameras, the gym adapters, training, the viewer, the VLA evaluation and the deploy CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys

_PROBE = "import mujoco; c = mujoco.GLContext(8, 8); c.make_current(); c.free(); print('ok')"


def has_display() -> bool:
    """True when an X11 or Wayland display is available (``DISPLAY`` or ``WAYLAND_DISPLAY`` set)."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def gl_backend_works(name: str, timeout: float = 60.0) -> bool:
    """True if MuJoCo can create an offscreen GL context with ``MUJOCO_GL=name`` (tested in a subprocess)."""
    env = {**os.environ, "MUJOCO_GL": name}
    if name == "osmesa":
        env.setdefault("PYOPENGL_PLATFORM", "osmesa")
    elif name == "egl":
        env.setdefault("PYOPENGL_PLATFORM", "egl")
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return proc.returncode == 0 and "ok" in proc.stdout


def choose_offscreen_gl() -> str | None:
    """Set ``MUJOCO_GL`` for headless rendering if it is unset and there is no display; return the backend.

    Returns:
        The backend in effect (``MUJOCO_GL``'s value, ``"egl"``, ``"osmesa"``), ``"glfw"`` with a display,
        or None when no backend works (rendering will fail with MuJoCo's own error).
    """
    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    if has_display():
        return "glfw"
    if "mujoco" in sys.modules:
        return None  # too late to choose: MuJoCo has read MUJOCO_GL already
    for name in ("egl", "osmesa"):
        if gl_backend_works(name):
            os.environ["MUJOCO_GL"] = name
            if name == "osmesa":
                os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
            return name
    return None
