"""Where and how does a lift policy fail? Success by cube start position and target height, failures by kind.

    python benchmarks/lift_failure_breakdown.py --policy upright/assets/policies/panda_lift/policy.onnx [--episodes 500]
    python benchmarks/lift_failure_breakdown.py --policy expert

Runs the evaluation protocol of :mod:`upright.training.lift_evaluate` (full ranges, randomisation on, ``--seed``; the
policy's action mode and ``ee_*`` settings from its file) and prints:

* the failures by kind: never grasped (both pads never on the cube), grasped but the cube never 5 cm up, lifted
  (>= 5 cm) but not delivered to within 2.5 cm of the target;
* the success rate per bin of the cube's start x (0.1 m bins over 0.5-0.9 m: 0.9 is the far edge, ~0.9 m from the
  arm's base, beyond the Panda's 0.855 m reach with the hand pointing down), of |y| and of the target's height;
* the mean number of env steps with the hand or a fingertip on the floor, successes against failures.

This located the committed policy's failures at the far edge (session 13, ``docs/lift_learning.md``).
"""

from __future__ import annotations

import argparse
import collections

import torch

from upright.training.lift_evaluate import make_lift_eval_env, policy_action_overrides

LIFTED_M = 0.05
"""Cube rise that counts as lifted for the failure kinds, m."""


def run(policy: str, episodes: int, num_envs: int, seed: int) -> list[dict]:
    """One row per episode: success, ever grasped, max rise (m), floor-contact steps, cube start x, y (m), target x
    (m), target height above the cube's start (m), final cube-target distance (m)."""
    overrides = ([] if policy == "expert" else policy_action_overrides(policy)) + ["sim.num_threads=2"]
    env, cfg = make_lift_eval_env(overrides, num_envs, True, seed)
    torch.set_num_threads(1)
    if policy == "expert":
        from upright.tasks.lift.expert import ScriptedExpert

        expert = ScriptedExpert(env)
        act, on_reset = (lambda: expert.act()), expert.reset
    else:
        from upright.viewer.policy import load_policy

        net = load_policy(policy, env, "lift", cfg.train, seed=seed)
        act, on_reset = (lambda: net(env.get_observations()["actor"])), (lambda ids: None)
    rows: list[dict] = []
    while len(rows) < episodes:
        env.reset_all()
        n = env.num_envs
        on_reset(torch.arange(n))
        start, target = env.cube_start.clone().cpu(), env.target_pos.clone().cpu()
        grasped, finished, success = (torch.zeros(n, dtype=torch.bool) for _ in range(3))
        rise, floor, final_distance = torch.zeros(n), torch.zeros(n), torch.zeros(n)
        for _ in range(env.max_episode_length):
            with torch.no_grad():
                _, _, dones, _ = env.step(act())
            s, live = env.last_state, ~finished
            grasped |= s.grasped.cpu() & live
            rise = torch.where(live, torch.maximum(rise, s.cube_lift.cpu()), rise)
            floor += (s.floor_contact.cpu() & live).float()
            new = dones.bool().cpu() & ~finished
            success[new] = env.success_once_at_done.cpu()[new]
            final_distance[new] = s.cube_to_target.norm(dim=-1).cpu()[new]
            finished |= new
            if bool(finished.all()):
                break
        for i in range(min(n, episodes - len(rows))):
            rows.append(
                {
                    "success": bool(success[i]),
                    "grasped": bool(grasped[i]),
                    "rise": float(rise[i]),
                    "floor_steps": float(floor[i]),
                    "x": float(start[i, 0]),
                    "y": float(start[i, 1]),
                    "tx": float(target[i, 0]),
                    "height": float(target[i, 2] - start[i, 2]),
                    "final_distance": float(final_distance[i]),
                }
            )
    env.close()
    return rows


def binned(rows: list[dict], key, width: float) -> str:
    """``bin: successes/episodes`` per bin of ``key(row)`` of ``width``."""
    bins = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        b = round(round(key(r) / width) * width, 3)
        bins[b][0] += r["success"]
        bins[b][1] += 1
    return "  ".join(f"{b:g}: {s}/{n} ({100 * s / n:.0f} %)" for b, (s, n) in sorted(bins.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="policy.onnx, run dir, model_<it>.pt or expert")
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--num-envs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = run(args.policy, args.episodes, args.num_envs, args.seed)
    fails = [r for r in rows if not r["success"]]
    ok = [r for r in rows if r["success"]]
    print(f"{args.policy}: {len(ok)}/{len(rows)} successes ({100 * len(ok) / len(rows):.1f} %), seed {args.seed}")
    print(
        f"failures {len(fails)}: never grasped {sum(not r['grasped'] for r in fails)}, grasped but never "
        f"{100 * LIFTED_M:.0f} cm up {sum(r['grasped'] and r['rise'] < LIFTED_M for r in fails)}, lifted but not "
        f"delivered {sum(r['rise'] >= LIFTED_M for r in fails)}"
    )
    print("success by cube start x (m):  ", binned(rows, lambda r: r["x"], 0.1))
    print("success by cube start |y| (m):", binned(rows, lambda r: abs(r["y"]), 0.1))
    print("success by target height (m): ", binned(rows, lambda r: r["height"], 0.1))
    print("success by target x (m):      ", binned(rows, lambda r: r["tx"], 0.1))
    for name, part in (
        ("cube x < 0.85", [r for r in fails if r["x"] < 0.85]),
        ("cube x >= 0.85", [r for r in fails if r["x"] >= 0.85]),
    ):
        print(
            f"failures with {name}: {len(part)}: never grasped {sum(not r['grasped'] for r in part)}, grasped but "
            f"never {100 * LIFTED_M:.0f} cm up {sum(r['grasped'] and r['rise'] < LIFTED_M for r in part)}, lifted "
            f"but not delivered {sum(r['rise'] >= LIFTED_M for r in part)} (median final distance "
            f"{100 * (sorted(r['final_distance'] for r in part)[len(part) // 2] if part else float('nan')):.1f} cm)"
        )
    mean = lambda rs: sum(r["floor_steps"] for r in rs) / max(len(rs), 1)  # noqa: E731
    print(f"env steps with the hand on the floor: successes {mean(ok):.1f}, failures {mean(fails):.1f}")


if __name__ == "__main__":
    main()
