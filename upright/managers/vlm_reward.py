"""``vlm_reward``: a reward term that turns a sentence into a reward through CLIP (VLM-RMs).

Rocamonde, Montesinos, Nava, Perez and Lindner, "Vision-Language Models are Zero-Shot Reward Models for
Reinforcement Learning" (ICLR 2024, arXiv:2310.12921), Section 3: the reward of a state s is

    R(s) = 1 - ½‖P(x_s - g)‖²,   P = α·d dᵀ/‖d‖² + (1 - α)·I,   d = g - b,

with x_s the L2-normalised CLIP embedding of the rendered frame, g that of the goal prompt ("a humanoid robot
kneeling") and b that of the baseline prompt ("a humanoid robot"). This is the paper's 1 - ½‖α·proj_L x_s +
(1 - α)·x_s - g‖² with L the line through b and g, since proj_L x = g + d dᵀ(x - g)/‖d‖². α = 0 gives the plain
CLIP reward 1 - ½‖x_s - g‖² = x_s·g (the cosine similarity); α = 1 keeps only the goal-baseline direction. R ≤ 1,
with equality at x_s = g.

Any task can add the term from its ``env.vlm_reward`` settings (:class:`VLMRewardCfg`) with
:func:`with_vlm_reward`: it renders every env's frame from one scene camera (:mod:`upright.managers.batch_render`),
embeds the frames with a ``transformers`` ``CLIPModel`` on the env's (the training) device, and evaluates the
reward-model every ``every`` env steps, holding the reward in between. Text embeddings are computed once per prompt.
The CLIP code lives in :mod:`upright.managers.clip_embedder`. ``docs/vlm_reward.md`` has the example task and costs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from upright.managers.reward import RewardGroup, RewardTerm

TERM_NAME = "vlm_reward"
"""Name of the term (its TensorBoard key is ``"{group}/vlm_reward"``)."""

DTYPES = ("float32", "bfloat16", "float16")
"""Values of :attr:`VLMRewardCfg.dtype`."""


@dataclass
class VLMRewardCfg:
    """``env.vlm_reward``: the VLM-RM reward term (off by default). Every value can be set from the command line,
    e.g. ``env.vlm_reward.enabled=true env.vlm_reward.goal_prompt='a humanoid robot kneeling'``."""

    enabled: bool = False
    """Add the term to the task's reward."""
    weight: float = 1.0
    """Weight of the term (sum groups: the addend is weight · dt · R, as every other term)."""
    group: str = "vlm"
    """Reward group: one of the task's groups joins it; any other name adds a new sum group (one more critic, so
    ``train.group_weights`` needs one more entry, last)."""
    model: str = "openai/clip-vit-base-patch32"
    """CLIP model as ``transformers`` names it on the Hugging Face Hub (``openai/clip-vit-large-patch14``,
    ``laion/CLIP-ViT-bigG-14-laion2B-39B-b160k``, ...), or a folder written by ``save_pretrained``. Loaded from the
    Hugging Face cache; downloaded into it if missing and the machine is online (``hf download <model>`` fetches it
    beforehand)."""
    goal_prompt: str = ""
    """Sentence describing the goal state, e.g. ``a humanoid robot kneeling`` (required)."""
    baseline_prompt: str = "a humanoid robot"
    """Sentence describing the scene without the goal (the paper's baseline b); used when alpha > 0."""
    alpha: float = 0.0
    """Goal-baseline regularisation strength α in [0, 1]: 0 = plain CLIP reward, 1 = only the goal-baseline
    direction counts."""
    camera: str = "tracking"
    """Scene camera the frames are rendered from (the G1's ``tracking`` camera follows its centre of mass; lift:
    ``front``, ``wrist``, ...)."""
    width: int = 224
    """Frame width, px. Frames are resized (shorter side) and centre-cropped to the model's input as its image
    processor does; rendering at the model's input size (224 for most CLIP models) skips the resize."""
    height: int = 224
    """Frame height, px."""
    every: int = 1
    """Env steps between reward-model evaluations; the reward is held in between (all envs are evaluated at the
    same steps: an env that resets in between keeps the previous episode's value until the next evaluation)."""
    backend: str = "auto"
    """Frame renderer: ``opengl`` (MuJoCo's, one env after the other), ``warp`` (MuJoCo Warp's batch ray tracer) or
    ``auto`` (Warp when it sees a CUDA device)."""
    effects: bool = False
    """Draw shadows, reflections and the skybox (costly with a software OpenGL)."""
    dtype: str = "float32"
    """CLIP weights' dtype: float32, bfloat16 or float16 (the halves for GPUs)."""
    batch_size: int = 256
    """Frames per CLIP forward pass (bounds the memory of one evaluation)."""
    cpu_threads: int = 0
    """CLIP on the CPU: torch threads of the image forward pass; 0 keeps the caller's (``train.py`` collects with 1
    thread). More threads than free cores slow it down badly."""


def validate_vlm_reward(cfg: VLMRewardCfg, prefix: str = "env.vlm_reward") -> None:
    """Check the settings of an enabled term.

    Raises:
        ValueError: one line naming the key and the fix: an empty goal prompt or group, alpha outside [0, 1], a
            baseline prompt equal to the goal with alpha > 0, every/batch_size < 1, cpu_threads < 0, a non-finite
            weight, a size under 16 px, an unknown dtype or backend.
    """
    from upright.managers.batch_render import BACKENDS

    if not str(cfg.goal_prompt).strip():
        raise ValueError(
            f"{prefix}.goal_prompt is empty; describe the goal, e.g. {prefix}.goal_prompt='a humanoid robot kneeling'"
        )
    if not 0.0 <= float(cfg.alpha) <= 1.0:
        raise ValueError(f"{prefix}.alpha must lie in [0, 1] (0: plain CLIP reward), got {cfg.alpha}")
    if float(cfg.alpha) > 0 and str(cfg.baseline_prompt).strip() == str(cfg.goal_prompt).strip():
        raise ValueError(
            f"{prefix}.baseline_prompt equals the goal prompt, so the goal-baseline direction is 0; "
            f"describe the scene without the goal (e.g. 'a humanoid robot') or set {prefix}.alpha=0"
        )
    if int(cfg.every) < 1:
        raise ValueError(f"{prefix}.every must be >= 1 (env steps between evaluations), got {cfg.every}")
    if int(cfg.batch_size) < 1:
        raise ValueError(f"{prefix}.batch_size must be >= 1, got {cfg.batch_size}")
    if int(cfg.cpu_threads) < 0:
        raise ValueError(f"{prefix}.cpu_threads must be >= 0 (0: torch's current count), got {cfg.cpu_threads}")
    if not math.isfinite(float(cfg.weight)):
        raise ValueError(f"{prefix}.weight must be a finite number, got {cfg.weight}")
    if not str(cfg.group).strip():
        raise ValueError(f"{prefix}.group is empty; name one of the task's reward groups or a new one, e.g. vlm")
    if int(cfg.width) < 16 or int(cfg.height) < 16:
        raise ValueError(f"{prefix}.width/height must be >= 16 px, got {cfg.width} x {cfg.height}")
    if cfg.dtype not in DTYPES:
        raise ValueError(f"{prefix}.dtype={cfg.dtype!r} is unknown; use one of {list(DTYPES)}")
    if cfg.backend not in BACKENDS:
        raise ValueError(f"{prefix}.backend={cfg.backend!r} is unknown; use one of {list(BACKENDS)}")


def goal_baseline_reward(x: torch.Tensor, goal: torch.Tensor, baseline: torch.Tensor, alpha: float) -> torch.Tensor:
    """The VLM-RM reward R = 1 - ½‖P(x - g)‖², P = α·d dᵀ/‖d‖² + (1 - α)·I, d = g - b (paper Section 3).

    Args:
        x: (N, D) image embeddings (any norm: each row is L2-normalised here, as in the paper).
        goal: (D,) goal-prompt embedding g (normalised here).
        baseline: (D,) baseline-prompt embedding b (normalised here; unused when alpha = 0).
        alpha: α in [0, 1].

    Returns:
        (N,) float32 rewards, dimensionless, in [-1, 1]: 1 at x = g (and, for α = 1, wherever x - g is orthogonal
        to d).

    Raises:
        ValueError: alpha outside [0, 1], or alpha > 0 with g = b (no goal-baseline direction).
    """
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    x = torch.nn.functional.normalize(x.float(), dim=-1)
    g = torch.nn.functional.normalize(goal.float().to(x.device), dim=-1)
    v = x - g
    if alpha > 0:
        d = g - torch.nn.functional.normalize(baseline.float().to(x.device), dim=-1)
        norm = d.norm()
        if norm < 1e-6:
            raise ValueError(
                "the goal and baseline embeddings coincide (d = g - b = 0); change the baseline prompt or set alpha=0"
            )
        d = d / norm
        v = alpha * (v @ d).unsqueeze(-1) * d + (1.0 - alpha) * v
    return 1.0 - 0.5 * v.square().sum(dim=-1)


class VLMRewardTerm:
    """The term's function: ``term(state) -> (N,)`` rewards R of the simulator's current frames, held for ``every``
    calls (one call per env step).

    The frames are those of the state the reward manager is evaluating: envs call it right after the physics step,
    before resets. ``state`` itself is not read.

    Args:
        embedder: the CLIP model (:class:`upright.managers.clip_embedder.ClipEmbedder`).
        renderer: frame renderer with ``render(sim) -> (N, H, W, 3) uint8`` (:mod:`upright.managers.batch_render`).
        sim: the env's simulator (``state.qpos`` (N, nq)).
        goal_prompt, baseline_prompt, alpha: see :class:`VLMRewardCfg`.
        every: env steps between evaluations, >= 1.

    Raises:
        ValueError: the prompts embed to the same vector with alpha > 0.
    """

    def __init__(self, embedder, renderer, sim, goal_prompt: str, baseline_prompt: str, alpha: float, every: int = 1):
        self.embedder, self.renderer, self.sim = embedder, renderer, sim
        self.alpha, self.every = float(alpha), int(every)
        self.goal = embedder.text(goal_prompt)
        """(D,) float32 normalised goal-prompt embedding g."""
        self.baseline = embedder.text(baseline_prompt)
        """(D,) float32 normalised baseline-prompt embedding b."""
        goal_baseline_reward(self.goal[None], self.goal, self.baseline, self.alpha)  # refuse g = b with alpha > 0
        self.calls = 0
        """Env steps seen (calls)."""
        self.evaluations = 0
        """Reward-model evaluations run (render + embed)."""
        self.render_s = 0.0
        """Wall time spent rendering, s (all evaluations)."""
        self.embed_s = 0.0
        """Wall time spent embedding and computing R, s (all evaluations)."""
        self.value: torch.Tensor | None = None
        """(N,) float32 reward held since the last evaluation."""

    def __call__(self, state=None) -> torch.Tensor:
        """(N,) float32 R of the current frames (evaluated on every ``every``-th call, from the first), on the
        embedder's device."""
        if self.calls % self.every == 0 or self.value is None:
            t0 = time.perf_counter()
            frames = self.renderer.render(self.sim)
            t1 = time.perf_counter()
            self.value = goal_baseline_reward(self.embedder.images(frames), self.goal, self.baseline, self.alpha)
            if self.value.is_cuda:
                torch.cuda.synchronize(self.value.device)
            self.render_s += t1 - t0
            self.embed_s += time.perf_counter() - t1
            self.evaluations += 1
        self.calls += 1
        return self.value.clone()

    def close(self) -> None:
        """Free the renderer."""
        self.renderer.close()


def make_vlm_term(
    cfg: VLMRewardCfg, model, sim, device: torch.device | str, prefix: str = "env.vlm_reward"
) -> VLMRewardTerm:
    """The :class:`VLMRewardTerm` of ``cfg`` for the scene ``model`` (``mujoco.MjModel``) run by ``sim``, with CLIP on
    ``device``.

    Raises:
        ValueError: see :func:`validate_vlm_reward`; an unknown camera.
        RuntimeError: no renderer can run here; ``transformers`` is not installed (the message says what to install).
        CLIPWeightsNotFoundError: the model is neither cached nor downloadable (one line saying how to fetch it).
    """
    from upright.managers.batch_render import make_frame_renderer
    from upright.managers.clip_embedder import ClipEmbedder

    validate_vlm_reward(cfg, prefix)
    renderer = make_frame_renderer(
        model, cfg.camera, cfg.width, cfg.height, cfg.backend, cfg.effects, prefix=f"{prefix}.camera", device=device
    )
    try:
        embedder = ClipEmbedder(cfg.model, device, cfg.dtype, cfg.batch_size, cfg.cpu_threads, prefix=f"{prefix}.model")
        return VLMRewardTerm(embedder, renderer, sim, cfg.goal_prompt, cfg.baseline_prompt, cfg.alpha, cfg.every)
    except BaseException:
        renderer.close()
        raise


def with_vlm_reward(
    terms: Sequence[RewardTerm],
    groups: Sequence[RewardGroup],
    cfg: VLMRewardCfg | None,
    model,
    sim,
    device: torch.device | str,
    prefix: str = "env.vlm_reward",
) -> tuple[list[RewardTerm], tuple[RewardGroup, ...]]:
    """A task's (terms, groups) plus the ``vlm_reward`` term when ``cfg.enabled`` (unchanged otherwise, and
    nothing of CLIP is imported).

    The term joins ``cfg.group`` if the task has it, else a new sum group of that name (dt-scaled, as the tasks'
    sum groups) is appended after the task's groups.

    Args:
        terms, groups: the task's reward terms and groups.
        cfg: ``env.vlm_reward`` (None: no term).
        model, sim, device: the scene, its simulator and the torch device CLIP runs on (the env's).
        prefix: config key named in errors.

    Raises:
        as :func:`make_vlm_term`.
    """
    terms, groups = list(terms), tuple(groups)
    if cfg is None or not cfg.enabled:
        return terms, groups
    validate_vlm_reward(cfg, prefix)
    if cfg.group not in [g.name for g in groups]:
        groups = (*groups, RewardGroup(str(cfg.group)))
    term = make_vlm_term(cfg, model, sim, device, prefix)
    return [*terms, RewardTerm(TERM_NAME, term, str(cfg.group), float(cfg.weight))], groups
