"""The standup task's env factory: HoST's MDP (:class:`~upright.tasks.standup.env.StandupEnv`) or the get-up
recipe's (:class:`~upright.tasks.standup.getup.env.GetupEnv`), by ``env.mdp``."""

from __future__ import annotations

MDPS = ("host", "getup")
"""Values of ``env.mdp``."""


def make_env(env_cfg, sim_cfg, device: str = "cpu", seed: int = 0):
    """The standup env of ``env_cfg.mdp``.

    Raises:
        ValueError: an unknown ``env.mdp`` (the message lists the valid ones).
    """
    mdp = str(getattr(env_cfg, "mdp", "host"))
    if mdp == "getup":
        from upright.tasks.standup.getup.env import GetupEnv

        return GetupEnv(env_cfg, sim_cfg, device=device, seed=seed)
    if mdp != "host":
        raise ValueError(f"env.mdp must be 'host' or 'getup', got {mdp!r}")
    from upright.tasks.standup.env import StandupEnv

    return StandupEnv(env_cfg, sim_cfg, device=device, seed=seed)
