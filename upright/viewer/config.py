"""The ``play`` Hydra config: the same task configs as ``train.py`` (group ``task``) plus play keys.

``python play.py task=standup policy=logs/standup/run viewer=web`` composes config ``play``: its
defaults pick ``task=standup`` (env/sim/train from the task, as for training), and the keys below
choose the policy or replay, the viewer and what to render.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from upright.conf import register_configs, task_defaults


class ViewerKind(Enum):
    """``viewer=``: how the run is shown."""

    auto = "auto"
    """native when ``DISPLAY`` or ``WAYLAND_DISPLAY`` is set, else web (``video=`` forces video)."""
    native = "native"
    """MuJoCo's passive viewer window."""
    video = "video"
    """Headless MP4 from MuJoCo's offscreen renderer."""
    web = "web"
    """viser in the browser."""


@dataclass
class RenderCfg:
    """Offscreen rendering of ``viewer=video`` (``render.width=320`` etc.)."""

    width: int = 640
    height: int = 480
    fps: int = 25
    """Video frames per second of sim time (the policy runs at 50 Hz; frames are sampled from it)."""
    distance: float | None = None
    """Camera distance to the robot, m (default: fitted so the robot spans ``fill`` of the frame height)."""
    azimuth: float | None = None
    """Camera azimuth, degrees (default: the task's view, :data:`upright.viewer.framing.TASK_VIEWS`)."""
    elevation: float | None = None
    """Camera elevation, degrees, negative looks down (default: the task's view)."""
    fill: float = 0.5
    """Fraction of the frame height the robot spans (standup: a camera tracking the robot; lift: a fixed view of the
    arm and its workspace)."""
    strip: bool = True
    """Draw a strip under each frame: episode time, episode number and the task's key quantity."""
    poster_frames: int = 4
    """Frames side by side in a ``video=poster.png`` poster."""
    quality: float = 6.0
    """imageio-ffmpeg quality 0..10 (higher: larger file)."""
    shadows: bool = False
    """Render shadows (about 2x slower on software OpenGL)."""
    reflection: bool = False
    """Render floor reflections (about 2x slower on software OpenGL)."""


@dataclass
class WebCfg:
    """The viser web viewer (``viewer=web``)."""

    host: str = "127.0.0.1"
    """Address to listen on: 127.0.0.1 (default) this machine only; ``web.host=0.0.0.0`` every interface, opt-in: the
    viewer has no authentication, so anyone who can reach the machine can watch and drive it (a warning is printed)."""
    port: int = 8080
    """Port of the viewer page."""
    status_port: int | None = None
    """Port of the JSON status endpoint ``/status`` (default: port + 1; 0: off)."""
    plot_window_s: float = 10.0
    """Seconds of history in the live plots."""


@dataclass
class PlayConfig:
    """Top-level ``play`` config. ``task`` picks env/sim/train as for training; the rest are play settings."""

    defaults: list[Any] = field(default_factory=task_defaults)
    policy: str | None = None
    """Run directory (its policy.onnx, else its latest model_<it>.pt), checkpoint ``.pt``, ``.onnx``, ``zero`` or
    ``random``."""
    replay: str | None = None
    """Play back a recording instead of a policy: a qpos trajectory ``.npz`` or a deploy-daemon dataset folder."""
    replay_episode: int | None = None
    """Episode of the recording to replay (default: all, in order)."""
    viewer: ViewerKind = ViewerKind.auto
    """auto | native | video | web."""
    video: str | None = None
    """Output of the headless video viewer (forces it): ``.mp4``, ``.gif``, or ``.png`` (a poster of a few frames)."""
    episodes: int | None = None
    """Episodes to play (video default 1; the interactive viewers loop until closed)."""
    duration: float | None = None
    """Sim seconds to play (overrides ``episodes``)."""
    beta: float | None = None
    """Action scale β held fixed during play, as in evaluation (default: the task's ``env.curriculum.beta_init``)."""
    instruction: str | None = None
    """Instruction for a VLA policy (task=lift: a TinyVLA, a VLA ``.onnx`` or a residual run), e.g.
    ``instruction="lift the red cube"``; default: the demonstrations' task string."""
    randomize: bool = False
    """Keep the task's randomisation (observation noise and ``env.domain_rand``: HoST's domain randomisation and
    the reset joint scatter). Off by default: nominal model, clean start."""
    record: str | None = None
    """Write the played qpos trajectory to this ``.npz`` (the format :mod:`upright.viewer.trajectory` reads)."""
    speed: float = 1.0
    """Real-time factor of the interactive viewers (keys/buttons change it)."""
    variant: str | None = None
    """Posture/terrain variant to start with (default: the task's first; see :mod:`upright.viewer.variants`)."""
    seed: int = 1
    """Seed of torch, numpy and the env RNG."""
    device: str = "cpu"
    """Torch device of the policy and env."""
    render: RenderCfg = field(default_factory=RenderCfg)
    web: WebCfg = field(default_factory=WebCfg)
    task_name: str = MISSING
    env: Any = MISSING
    sim: Any = MISSING
    train: Any = MISSING


def register_play_config() -> None:
    """Register the task configs (``register_configs``) and config ``play`` (idempotent)."""
    register_configs()
    ConfigStore.instance().store(name="play", node=PlayConfig)
