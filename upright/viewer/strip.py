"""The strip under each video frame: time, episode and the task's key quantity, as text and as a bar.

:func:`strip_values` reads the numbers from a session's display state, :func:`strip_lines` turns them into the two
text lines, :func:`draw_strip` draws them (PIL, its built-in font) with a bar of the key quantity and a tick at its
reference (G1: head height above the feet against the standing robot's; Panda: cube height against the target's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

BACKGROUND = (24, 24, 28)
TEXT = (235, 235, 235)
BAR = (80, 170, 255)
TICK = (255, 90, 80)


@dataclass
class StripValues:
    """What one strip shows."""

    time: float
    """Episode time, s."""
    episode: int
    """Episode number, from 1."""
    quantities: dict[str, float]
    """Named key quantities, m, in display order."""
    bar: float = math.nan
    """Value drawn as the bar, m."""
    bar_ref: float = math.nan
    """Reference drawn as a tick on the bar, m (standing head height; the target height)."""
    bar_max: float = 1.0
    """Bar's full scale, m."""


def strip_lines(v: StripValues) -> tuple[str, str]:
    """The two text lines of ``v``: time and episode, then the quantities (``name value m``)."""
    fmt = lambda x: "-" if not math.isfinite(x) else f"{x:.2f} m"  # noqa: E731
    return f"t {v.time:5.2f} s   episode {v.episode}", "   ".join(f"{k} {fmt(x)}" for k, x in v.quantities.items())


def strip_height(frame_height: int) -> int:
    """Strip height for a frame ``frame_height`` tall: 15 %, at least 40 px, a multiple of 8 (H.264 blocks)."""
    return int(8 * math.ceil(max(40.0, 0.15 * frame_height) / 8))


def draw_strip(width: int, height: int, v: StripValues) -> np.ndarray:
    """The strip as an RGB image (height, width, 3)."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    size = max(8, int(height * 0.3))
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType sizes
        font = ImageFont.load_default()
    pad = max(2, height // 12)
    line1, line2 = strip_lines(v)
    draw.text((pad, pad), line1, fill=TEXT, font=font)
    draw.text((pad, pad + size + 2), line2, fill=TEXT, font=font)
    bar_h = max(2, height // 10)  # the bar along the bottom edge: value over the full scale, a tick at the reference
    y0 = height - bar_h - 1
    draw.rectangle([0, y0, width - 1, height - 1], fill=(50, 50, 56))
    if math.isfinite(v.bar):
        x = int(np.clip(v.bar / v.bar_max, 0.0, 1.0) * (width - 1))
        draw.rectangle([0, y0, x, height - 1], fill=BAR)
    if math.isfinite(v.bar_ref):
        x = int(np.clip(v.bar_ref / v.bar_max, 0.0, 1.0) * (width - 1))
        draw.rectangle([max(0, x - 1), y0 - bar_h, min(width - 1, x + 1), height - 1], fill=TICK)
    return np.asarray(img)


class StripReader:
    """Reads :class:`StripValues` from a session's display state (``data``) for ``task``."""

    def __init__(self, model: mujoco.MjModel, task: str | None, root_body: int):
        self.task = task
        self.root_body = root_body
        name = lambda t, n: mujoco.mj_name2id(model, t, n)  # noqa: E731
        self.cube = name(mujoco.mjtObj.mjOBJ_BODY, "box")
        self.gripper = name(mujoco.mjtObj.mjOBJ_SITE, "gripper")
        self.head = name(mujoco.mjtObj.mjOBJ_SITE, "head")
        feet = (name(mujoco.mjtObj.mjOBJ_SITE, f"{side}_foot") for side in ("left", "right"))
        self.feet = [s for s in feet if s >= 0]
        self.standing_head = math.nan
        if self.head >= 0 and self.feet:  # head above the feet of the model's own pose (qpos0: the G1 stands)
            d = mujoco.MjData(model)
            mujoco.mj_kinematics(model, d)
            self.standing_head = self.head_height(d)

    def head_height(self, data: mujoco.MjData) -> float:
        if self.head < 0 or not self.feet:
            return math.nan
        return float(data.site_xpos[self.head, 2] - np.mean([data.site_xpos[s, 2] for s in self.feet]))

    def values(self, data: mujoco.MjData, time: float, episode: int) -> StripValues:
        """Strip values of ``data`` at episode ``time`` (s) of ``episode`` (from 1)."""
        if self.task == "lift" and self.cube >= 0:
            cube = float(data.xpos[self.cube, 2])
            target = float(data.mocap_pos[0, 2]) if data.mocap_pos.shape[0] else math.nan
            return StripValues(time, episode, {"cube height": cube, "target height": target}, cube, target, 0.5)
        if self.head >= 0 and self.feet:  # a humanoid (the G1)
            head = self.head_height(data)
            pelvis = float(data.xpos[self.root_body, 2])
            return StripValues(time, episode, {"head above feet": head, "pelvis height": pelvis}, head,
                               self.standing_head, 1.5)  # fmt: skip
        if self.gripper >= 0:  # an arm without a cube (reach): where its gripper is
            z = float(data.site_xpos[self.gripper, 2])
            return StripValues(time, episode, {"gripper height": z}, z, math.nan, 1.0)
        return StripValues(time, episode, {})
