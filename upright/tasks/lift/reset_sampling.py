"""How the lift env draws its episode starts: :class:`LiftResetSampling`, a mixin of
:class:`~upright.tasks.lift.env.LiftEnv` holding :meth:`~LiftResetSampling.sample_reset` (cube start centres and
targets at each env's curriculum level, with the far-edge band) and the grasped starts (a
``curriculum.grasped_start_fraction`` of the starts with the cube already between the fingers,
:mod:`upright.tasks.lift.grasp_start`). :meth:`LiftEnv.reset_envs <upright.tasks.lift.env.LiftEnv.reset_envs>` calls
both; they read the env's config, curriculum, random generator and home pose.
"""

from __future__ import annotations

import torch

from upright.tasks.lift.curriculum import reset_ranges


class LiftResetSampling:
    """Start-state sampling of :class:`~upright.tasks.lift.env.LiftEnv` (a mixin: it uses the env's ``cfg``,
    ``curriculum``, ``rng``, ``device``, ``cube_home``, ``home_q``, ``model``, ``ik``, ``randomizer`` and its
    ``_grasp_ik`` / ``_q_adr``)."""

    def sample_reset(self, env_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw the cube start centres and targets of ``env_ids`` (M,) at their curriculum levels: two (M, 3) m."""
        m, dev = int(env_ids.numel()), self.device
        r = reset_ranges(self.cfg, self.curriculum.level[env_ids])
        u = lambda *shape: (torch.rand(*shape, generator=self.rng) * 2.0 - 1.0).to(dev)  # noqa: E731
        cube = self.cube_home.expand(m, 3).clone()
        cube[:, :2] += u(m, 2) * r["cube_xy"].unsqueeze(-1)
        target = self.cube_home.expand(m, 3).clone()
        target[:, :2] += u(m, 2) * r["target_xy"].unsqueeze(-1)
        h0 = r["target_height_min"]
        target[:, 2] += h0 + (u(m) + 1.0) / 2.0 * (r["target_height_max"] - h0)
        c = self.cfg.curriculum
        if c.enabled and c.far_edge_fraction > 0.0:
            for pos, half in ((cube, r["cube_xy"]), (target, r["target_xy"])):
                far = (u(m) + 1.0) / 2.0 < c.far_edge_fraction
                band = (2.0 * half).clamp(max=c.far_edge_band)  # never wider than the range itself
                edge_x = self.cube_home[0] + half - (u(m) + 1.0) / 2.0 * band
                pos[:, 0] = torch.where(far, edge_x, pos[:, 0])
        return cube, target

    def _grasped_starts(self, env_ids: torch.Tensor, cube: torch.Tensor, qpos: torch.Tensor, ctrl: torch.Tensor):
        """Turn a ``grasped_start_fraction`` of the starts of ``env_ids`` (M,) into grasped ones, in place in ``qpos``
        (M, nq) and ``ctrl`` (M, 8) (:mod:`upright.tasks.lift.grasp_start`); returns the (M,) bool mask of those
        that are (None when off)."""
        frac = float(self.cfg.curriculum.grasped_start_fraction)
        if frac <= 0.0 or not self.cfg.curriculum.enabled:
            return None
        pick = (torch.rand(len(env_ids), generator=self.rng) < frac).to(self.device)
        if not bool(pick.any()):
            return pick
        from upright.tasks.lift.grasp_start import FINGER_CLEARANCE, solve_grasp_arm

        if self._grasp_ik is None:
            from upright.tasks.lift.ik import DifferentialIK

            self._grasp_ik = self.ik or DifferentialIK(self.model)
        rows = pick.nonzero().flatten()
        q, ok = solve_grasp_arm(self._grasp_ik, self.home_q[:7], cube[rows])
        rows, q = rows[ok], q[ok]
        pick[:] = False
        pick[rows] = True
        if rows.numel() == 0:
            return pick
        adr = self._q_adr.to(self.device)
        opening = self.randomizer.cube_half_size(env_ids[rows])[:, 1] + FINGER_CLEARANCE  # fingers close along y
        qpos[rows.unsqueeze(-1), adr[:7]] = q
        qpos[rows.unsqueeze(-1), adr[7:9]] = opening.unsqueeze(-1).expand(-1, 2)
        ctrl[rows, :7] = q
        ctrl[rows, 7] = 0.0  # close
        return pick
