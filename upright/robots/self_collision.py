"""Which robot collision-geom pairs can touch: a joint-space sampling check, and the pair-list generator.

A robot's self-collision set is every pair of its collision geoms on different bodies, minus

1. **parent-child body pairs** (the joint between them keeps their geoms overlapping or adjacent by
   construction; MuJoCo's own ``filterparent`` rule);
2. **the model's own** ``<contact><exclude>`` **body pairs** (the G1 MJCF excludes pelvis-hip_roll and
   elbow-wrist_pitch: bodies two joints apart whose capsules overlap at every joint angle, as the excluded
   pairs' 100 % contact in :func:`sample_min_distances` shows);
3. **pairs that the joint limits keep apart**: with the floating base fixed, joint configurations are
   drawn uniformly within the joint ranges, MuJoCo's collision pipeline (``mj_kinematics`` +
   ``mj_collision`` with every geom's margin set to ``record_distance``) reports every pair closer
   than that distance, and a pair whose minimum signed distance over all samples stays above the
   safety ``margin`` is pruned.

The G1's list is generated once by ``python -m upright.robots.self_collision`` (writes
``upright/robots/g1_collision_pairs.py``; settings in that file's header) and checked by a smaller fresh run in
``tests/test_g1_self_collision.py``.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import sys
import time
from dataclasses import dataclass

import mujoco
import numpy as np

DEFAULT_SAMPLES = 400_000
"""Joint configurations drawn for the committed G1 list."""
DEFAULT_MARGIN = 0.03
"""Safety margin, m: a pair is kept if its geoms ever come closer than this (surface to surface)."""
DEFAULT_RECORD_DISTANCE = 0.10
"""Distances are recorded up to this, m (larger ones are reported as '> 0.10')."""
DEFAULT_SEED = 0


@dataclass(frozen=True)
class PairSurvey:
    """Result of :func:`sample_min_distances` for the candidate pairs of one model.

    Attributes:
        pairs: candidate (geom1, geom2) names, geom1 before geom2 in model order.
        min_distance: float64 (P,): minimum signed surface distance of each pair over all samples, m
            (negative: penetration); ``inf`` where it never came within ``record_distance``.
        penetrating_fraction: float64 (P,): fraction of samples in which the pair penetrates (distance < 0).
        excluded: (geom1, geom2, reason) for the pairs on different bodies that are not candidates
            (``"parent-child"`` or ``"model exclude"``), with their sampled minimum distance.
        num_samples, seed, record_distance: the run's settings.
    """

    pairs: list[tuple[str, str]]
    min_distance: np.ndarray
    penetrating_fraction: np.ndarray
    excluded: list[tuple[str, str, str, float, float]]
    num_samples: int
    seed: int
    record_distance: float

    def within(self, margin: float) -> list[tuple[str, str]]:
        """Candidate pairs that came closer than ``margin`` (m) in some sample, in model order."""
        return [p for p, d in zip(self.pairs, self.min_distance) if d < margin]


def collision_geoms(model: mujoco.MjModel) -> list[int]:
    """Ids of the robot's collision geoms: geoms that collide with something (contype or conaffinity
    nonzero) on a body other than the world."""
    return [
        g
        for g in range(model.ngeom)
        if (model.geom_contype[g] or model.geom_conaffinity[g]) and model.geom_bodyid[g] != 0
    ]


def _parent_child(model: mujoco.MjModel, b1: int, b2: int) -> bool:
    return model.body_parentid[b1] == b2 or model.body_parentid[b2] == b1


def classify_pairs(
    model: mujoco.MjModel, excluded_bodies: set[frozenset[str]]
) -> tuple[list[tuple[int, int]], list[tuple[int, int, str]]]:
    """Split the robot's collision-geom pairs on different bodies into candidates and exclusions.

    Args:
        model: compiled robot model.
        excluded_bodies: body-name pairs the model excludes (its ``<contact><exclude>`` elements).

    Returns:
        (candidates, excluded): candidate (g1, g2) geom-id pairs with g1 < g2, and (g1, g2, reason)
        with reason ``"parent-child"`` or ``"model exclude"``.
    """
    geoms = collision_geoms(model)
    candidates, excluded = [], []
    for a, g1 in enumerate(geoms):
        for g2 in geoms[a + 1 :]:
            b1, b2 = int(model.geom_bodyid[g1]), int(model.geom_bodyid[g2])
            if b1 == b2:
                continue
            if _parent_child(model, b1, b2):
                excluded.append((g1, g2, "parent-child"))
            elif frozenset((model.body(b1).name, model.body(b2).name)) in excluded_bodies:
                excluded.append((g1, g2, "model exclude"))
            else:
                candidates.append((g1, g2))
    return candidates, excluded


def survey_model(spec: mujoco.MjSpec) -> tuple[mujoco.MjModel, set[frozenset[str]]]:
    """Compile ``spec`` for the sampling check: every collision geom collides with every other
    (contype = conaffinity = 1), no body excludes, no parent filter, no explicit pairs.

    Returns:
        (model, excluded_bodies): the survey model and the body-name pairs ``spec`` excluded.
    """
    spec = spec.copy()
    excluded_bodies = {frozenset((e.bodyname1, e.bodyname2)) for e in spec.excludes}
    for e in list(spec.excludes):
        spec.delete(e)
    for p in list(spec.pairs):
        spec.delete(p)
    for geom in spec.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = 1, 1
    model = spec.compile()
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    return model, excluded_bodies


def sample_min_distances(
    spec: mujoco.MjSpec,
    num_samples: int,
    seed: int = DEFAULT_SEED,
    record_distance: float = DEFAULT_RECORD_DISTANCE,
    progress: bool = False,
) -> PairSurvey:
    """Minimum surface distance of every robot collision-geom pair over random joint configurations.

    The floating base stays at ``qpos0``; each hinge/slide joint is drawn uniformly within its range
    (``numpy.random.default_rng(seed)``; unlimited joints over [-π, π]). Distances are MuJoCo's signed
    contact distances (``mjContact.dist``, m) from ``mj_collision`` with every geom's margin set to
    ``record_distance``, so only pairs closer than that are seen.

    Args:
        spec: the robot (e.g. the Menagerie G1 as loaded from its MJCF); it is copied, not modified.
        num_samples: joint configurations to draw.
        seed: RNG seed.
        record_distance: distances are recorded up to this, m.
        progress: print a progress line to stderr every 50,000 samples.

    Returns:
        A :class:`PairSurvey` over the candidate pairs (see :func:`classify_pairs`).
    """
    model, excluded_bodies = survey_model(spec)
    model.geom_margin[:] = record_distance
    model.geom_gap[:] = 0.0
    data = mujoco.MjData(model)
    candidates, excluded = classify_pairs(model, excluded_bodies)

    movable = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    jnt = [j for j in range(model.njnt) if int(model.jnt_type[j]) in movable]
    adr = np.array([model.jnt_qposadr[j] for j in jnt], dtype=np.int64)
    lo = np.array([model.jnt_range[j, 0] if model.jnt_limited[j] else -np.pi for j in jnt])
    hi = np.array([model.jnt_range[j, 1] if model.jnt_limited[j] else np.pi for j in jnt])
    rng = np.random.default_rng(seed)

    ng = model.ngeom
    best = np.full(ng * ng, np.inf)
    pen = np.zeros(ng * ng, dtype=np.int64)
    data.qpos[:] = model.qpos0
    chunk = 10_000
    t0 = time.perf_counter()
    for start in range(0, num_samples, chunk):
        qs = rng.uniform(lo, hi, size=(min(chunk, num_samples - start), len(jnt)))
        for q in qs:
            data.qpos[adr] = q
            mujoco.mj_kinematics(model, data)
            mujoco.mj_collision(model, data)
            n = data.ncon
            if n == 0:
                continue
            g = data.contact.geom[:n]
            key = np.minimum(g[:, 0], g[:, 1]) * ng + np.maximum(g[:, 0], g[:, 1])
            dist = data.contact.dist[:n]
            np.minimum.at(best, key, dist)
            pen[np.unique(key[dist < 0])] += 1
        if progress and (start + chunk) % 50_000 == 0:
            print(f"  {start + len(qs):>8d} samples  {time.perf_counter() - t0:6.1f} s", file=sys.stderr)

    def key(g1: int, g2: int) -> int:
        return min(g1, g2) * ng + max(g1, g2)

    name = lambda g: model.geom(g).name  # noqa: E731
    return PairSurvey(
        pairs=[(name(a), name(b)) for a, b in candidates],
        min_distance=np.array([best[key(a, b)] for a, b in candidates]),
        penetrating_fraction=np.array([pen[key(a, b)] / num_samples for a, b in candidates]),
        excluded=[
            (name(a), name(b), why, float(best[key(a, b)]), pen[key(a, b)] / num_samples) for a, b, why in excluded
        ],
        num_samples=num_samples,
        seed=seed,
        record_distance=record_distance,
    )


def write_pair_module(path: pathlib.Path, survey: PairSurvey, margin: float, elapsed_s: float, source: str) -> None:
    """Write the kept pairs (min distance < ``margin``) as a Python constant, with the run's settings."""
    kept = [(p, d, f) for p, d, f in zip(survey.pairs, survey.min_distance, survey.penetrating_fraction) if d < margin]
    pruned = [(p, d) for p, d in zip(survey.pairs, survey.min_distance) if d >= margin]
    fmt = lambda d: f"> {survey.record_distance:.2f}" if not np.isfinite(d) else f"{d:+.4f}"  # noqa: E731
    lines = [
        '"""G1 self-collision geom pairs that the joint limits do not keep apart (GENERATED: do not edit).',
        "",
        "Generated by ``python -m upright.robots.self_collision`` (:mod:`upright.robots.self_collision`) on",
        f"{source}, {datetime.date.today().isoformat()}:",
        f"{survey.num_samples:,} joint configurations drawn uniformly within the joint ranges (floating base fixed),",
        f"seed {survey.seed}, safety margin {margin} m (a pair is kept if its geoms ever came closer than that),",
        f"distances recorded up to {survey.record_distance} m; {elapsed_s:.0f} s on one CPU core.",
        "",
        "Candidates: every pair of collision geoms on different bodies except parent-child body pairs and the",
        f"model's own <exclude> body pairs: {len(survey.pairs)} pairs. Kept: {len(kept)}. Pruned: {len(pruned)}.",
        "The minimum sampled distance (m, negative = penetration) and the fraction of samples in contact follow",
        "each kept pair; the pruned pairs and the excluded ones, with their minimum distances, are listed at the end.",
        '"""',
        "",
        "PAIRS: tuple[tuple[str, str], ...] = (",
    ]
    for (a, b), d, f in kept:
        lines.append(f'    ("{a}", "{b}"),  # min {fmt(d)} m, in contact {100 * f:.2f} %')
    lines.append(")")
    lines.append(
        f'"""The {len(kept)} self-collision pairs (geom names of the Menagerie G1 ``g1_mjlab.xml``), model order."""'
    )
    lines.append("")
    lines.append("# Pruned (never within the margin): pair, minimum sampled distance (m)")
    for (a, b), d in pruned:
        lines.append(f"#   {a} - {b}: {fmt(d)}")
    lines.append("# Excluded (not candidates): pair, reason, minimum sampled distance (m), fraction in contact")
    for a, b, why, d, f in survey.excluded:
        lines.append(f"#   {a} - {b}: {why}, {fmt(d)}, {100 * f:.1f} %")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    """CLI: sample the Menagerie G1 and write ``upright/robots/g1_collision_pairs.py``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN)
    parser.add_argument("--record-distance", type=float, default=DEFAULT_RECORD_DISTANCE)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).with_name("g1_collision_pairs.py"))
    args = parser.parse_args(argv)

    from upright.robots import g1
    from upright.robots.menagerie import model_path

    spec = mujoco.MjSpec.from_file(str(model_path(g1.MENAGERIE_NAME, g1.ENTRY_FILE)))
    t0 = time.perf_counter()
    survey = sample_min_distances(spec, args.samples, args.seed, args.record_distance, progress=True)
    elapsed = time.perf_counter() - t0
    source = f"MuJoCo {mujoco.__version__}, Menagerie {g1.MENAGERIE_NAME}/{g1.ENTRY_FILE}"
    write_pair_module(args.out, survey, args.margin, elapsed, source)
    print(
        f"{len(survey.within(args.margin))} of {len(survey.pairs)} candidate pairs kept; "
        f"wrote {args.out} ({elapsed:.0f} s)"
    )


if __name__ == "__main__":
    main()
