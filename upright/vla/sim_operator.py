"""A simulated operator for intervention data: a policy drives the lift env, and the scripted expert takes over an
episode that is about to fail, logged with exactly the deploy daemon's columns (``intervention``, ``control_source``).

Rule (HIL-SERL / Sirius style "about to fail" test, upright's thresholds): at env step ``check_step`` (default 50,
1.0 s into the 3 s episode) an env whose cube is not grasped (both finger pads on it, the task's contact sensors)
is handed to the expert for the rest of the episode; the expert starts its pick from the current state.

With ``--hand-back-height H`` the operator corrects and hands back, as a human does in HG-DAgger (Kelly et al.,
ICRA 2019) and Sirius (Liu et al., RSS 2023): the expert gives control back as soon as the cube is grasped and
``H`` (m) above its start, and takes over again if the policy then drops it (not grasped, less than 1 cm up). The
intervention frames are then the corrections themselves, in the states the policy reaches.

With ``--operator POLICY`` a trained policy (any chunked policy ``evaluate_lift`` loads, e.g. the residual pair
``upright/assets/policies/panda_lift_residual``) plays the human instead of the scripted expert. The scripted
expert's action
depends on its hidden waypoint phase and on when it took over, not on the observation alone, so its corrections are
hard to clone from the observation; a policy's corrections are a function of what the student sees
(``docs/vla_residual.md``, session 11).

    python -m upright.vla.sim_operator --policy runs/tiny_vla --episodes 100 --out data/interventions [--check-step 50]
        [--hand-back-height 0.03] [--operator upright/assets/policies/panda_lift_residual]
"""

from __future__ import annotations

import argparse

import torch


class TakeoverController:
    """``c(env, obs) -> (actions (N, 8), human (N,) bool)`` for :func:`upright.training.record_demos.record`.

    Args:
        env: the lift env.
        policy: the base :class:`~upright.vla.policy.ChunkPolicy`; ``spec`` its inputs (as
            :func:`upright.vla.evaluate_lift.load_chunk_policy` returns them).
        check_step: env step of the grasp check.
        instruction: the policy's instruction.
        hand_back_height: None: the expert keeps the episode. Else the expert hands back once the cube is grasped and
            this high above its start (m), and retakes an episode whose cube the policy drops.
        operator: None: the scripted expert intervenes. Else ``(policy, spec)`` of a chunked policy that plays the
            human (as :func:`upright.vla.evaluate_lift.load_chunk_policy` returns them).

    Raises:
        ValueError: ``hand_back_height`` <= 0.
    """

    def __init__(
        self,
        env,
        policy,
        spec: dict,
        check_step: int = 50,
        instruction: str | None = None,
        hand_back_height: float | None = None,
        operator: tuple | None = None,
    ):
        from upright.tasks.lift.expert import ScriptedExpert
        from upright.tasks.lift.vla_io import TASK

        if hand_back_height is not None and hand_back_height <= 0:
            raise ValueError(f"hand_back_height must be > 0 m (e.g. 0.03), got {hand_back_height}")
        self.env, self.policy, self.spec = env, policy, spec
        self.operator = operator
        self.expert = ScriptedExpert(env) if operator is None else None
        self.check_step = int(check_step)
        self.instruction = instruction or TASK
        self.hand_back_height = hand_back_height
        self.human = torch.zeros(env.num_envs, dtype=torch.bool)
        """(N,) the expert controls this env now."""
        self.handed_back = torch.zeros(env.num_envs, dtype=torch.bool)
        """(N,) the expert has handed this env's episode back to the policy (``hand_back_height`` only)."""
        self.handbacks = 0
        """Hand-backs so far."""
        self.takeovers = 0
        """Episodes taken over so far."""

    def reset(self, env_ids: torch.Tensor) -> None:
        """New episodes in ``env_ids``: the policy drives again."""
        self.human[env_ids] = False
        self.handed_back[env_ids] = False
        self.policy.reset(env_ids)
        self._operator_reset(env_ids)

    def _operator_reset(self, env_ids: torch.Tensor) -> None:
        if self.operator is None:
            self.expert.reset(env_ids)
        else:
            self.operator[0].reset(env_ids)

    def _operator_act(self, env, obs) -> torch.Tensor:
        """(N, 8) the human's action for every env (only the taken-over envs' are used)."""
        from upright.vla.evaluate_lift import make_batch

        if self.operator is None:
            return self.expert.act().cpu()  # advances every env's expert
        policy, spec = self.operator
        return policy.select_action(make_batch(env, obs, spec, self.instruction, [])).float()

    def __call__(self, env, obs) -> tuple[torch.Tensor, torch.Tensor]:
        from upright.vla.evaluate_lift import make_batch

        step = env.episode_length_buf.cpu()
        grasped = env.state.grasped.cpu()
        take = (~self.human) & (step == self.check_step) & ~grasped
        if self.hand_back_height is not None:
            lift = env.state.cube_lift.cpu()
            back = self.human & grasped & (lift > self.hand_back_height)
            self.human &= ~back
            self.handed_back |= back
            self.handbacks += int(back.sum())
            if back.any():
                self.policy.reset(back.nonzero().flatten())  # its next chunk starts from the handed-back state
            take |= self.handed_back & (~self.human) & (~grasped) & (lift < 0.01)
        if take.any():
            ids = take.nonzero().flatten()
            self._operator_reset(ids)
            self.human[ids] = True
            self.takeovers += int(ids.numel())
        a_policy = self.policy.select_action(make_batch(env, obs, self.spec, self.instruction, []))
        a_expert = self._operator_act(env, obs)
        actions = torch.where(self.human.unsqueeze(1), a_expert, a_policy.float())
        return actions, self.human.clone()


def main(argv: list[str] | None = None) -> None:
    from upright.training.record_demos import record
    from upright.vla.evaluate_lift import load_chunk_policy

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="the base: a folder with model.pt or policy.onnx, or the file")
    parser.add_argument("--episodes", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--num-envs", type=int, default=25)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--check-step", type=int, default=50)
    parser.add_argument(
        "--hand-back-height",
        type=float,
        default=None,
        help="m: hand back once the cube is grasped this high (default: the expert keeps the episode)",
    )
    parser.add_argument(
        "--operator", default=None, help="a chunked policy that plays the human (default: the scripted expert)"
    )
    args = parser.parse_args(argv)
    if args.hand_back_height is not None and args.hand_back_height <= 0:
        parser.error("--hand-back-height must be > 0 m (e.g. 0.03)")
    torch.set_num_threads(1)
    try:
        policy, spec = load_chunk_policy(args.policy)
        operator = load_chunk_policy(args.operator) if args.operator else None
    except (FileNotFoundError, ValueError) as err:
        parser.exit(2, f"sim_operator: {err}\n")
    if spec["cameras"] or (operator is not None and operator[1]["cameras"]):
        parser.exit(
            2,
            "sim_operator: the base or the operator reads cameras; this operator records state-only data "
            "(use state-only policies, train_bc --no-images)\n",
        )
    made = []

    def factory(env):
        made.append(
            TakeoverController(
                env, policy, spec, args.check_step, hand_back_height=args.hand_back_height, operator=operator
            )
        )
        return made[0]

    summary = record(args.out, args.episodes, args.num_envs, args.seed, controller=factory)
    print(
        f"{args.out}: {summary['episodes']} episodes, {summary['frames']} frames, {summary['successes']} "
        f"successful; the expert took over {made[0].takeovers} times, handed back {made[0].handbacks} times"
    )


if __name__ == "__main__":
    main()
