"""Reset placement of the standup robot: a random sub-terrain per env and the pelvis pose on it.

At every reset each env draws one sub-terrain of its terrain uniformly (HoST ``curriculum=False``:
uniform over the difficulty list). The pelvis starts ``start_run`` metres from the sub-terrain's
anchor toward -x (:class:`~upright.tasks.standup.terrains.settings.TerrainSpec`), ``init_height``
above the terrain surface there, in the posture's orientation. Units: m; quaternions (w, x, y, z),
world frame.
"""

from __future__ import annotations

import torch

from upright.tasks.standup.terrains.geometry import RAMP_CAP_HEIGHT, TerrainLayout
from upright.tasks.standup.terrains.settings import TerrainSpec


class StartSampler:
    """Draws start sub-terrains and pelvis poses for resetting envs.

    Args:
        layout: the terrain's sub-terrains (as built into the model).
        spec: the terrain's settings (start range, posture orientation).
        posture: ``supine`` or ``prone`` (already checked against ``spec``).
        init_height: pelvis height above the terrain surface, m (the env config's ``init_height``).
        device: torch device of the returned tensors.
    """

    def __init__(
        self,
        layout: TerrainLayout,
        spec: TerrainSpec,
        posture: str,
        init_height: float,
        device: torch.device | str = "cpu",
    ):
        self.layout, self.spec, self.device = layout, spec, torch.device(device)
        subs = layout.sub_terrains
        self.anchors = torch.tensor([s.anchor for s in subs], dtype=torch.float32)
        """(S, 2) world xy of each sub-terrain's anchor, m."""
        self.heights = torch.tensor([s.height for s in subs], dtype=torch.float32)
        """(S,) platform top heights, m (0 for other terrains)."""
        self.gradients = torch.tensor([s.gradient for s in subs], dtype=torch.float32)
        """(S,) ramp gradients (rise/run toward -x); 0 for ground and platform."""
        self.init_height = float(init_height)
        self.quat = torch.tensor(spec.start_quat(posture), dtype=torch.float32)
        """(4,) pelvis orientation at reset (w, x, y, z)."""

    @property
    def num_sub_terrains(self) -> int:
        return self.anchors.shape[0]

    def sample(self, num: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Start poses for ``num`` resetting envs.

        Args:
            num: number of envs M.
            generator: CPU random generator (the env's).

        Returns:
            ``sub_terrain`` (M,) int64 index into the layout's sub-terrains, ``base_pos`` (M, 3) float32
            pelvis position (world, m) and ``base_quat`` (M, 4) float32 pelvis orientation (w, x, y, z).
        """
        idx = torch.randint(self.num_sub_terrains, (num,), generator=generator)
        lo, hi = self.spec.start_run
        run = lo + (hi - lo) * torch.rand(num, generator=generator)
        pos = torch.zeros(num, 3)
        pos[:, 0] = self.anchors[idx, 0] - run
        pos[:, 1] = self.anchors[idx, 1]
        # terrain surface under the start point: platform top, or the ramp at `run` up from its foot
        inside = run >= 0.0
        surface = torch.where(inside, self.heights[idx], torch.zeros(num))
        ramp = (run.clamp(min=0.0) * self.gradients[idx]).clamp(max=RAMP_CAP_HEIGHT)
        surface = torch.where(self.gradients[idx] > 0, ramp, surface)
        pos[:, 2] = surface + self.init_height
        quat = self.quat.expand(num, 4).clone()
        return idx.to(self.device), pos.to(self.device), quat.to(self.device)
