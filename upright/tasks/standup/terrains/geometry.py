"""Terrain geometry of the standup task, built with ``MjSpec`` boxes: a row of sub-terrains in one world.

All N envs share one compiled ``MjModel``, so, as HoST does (``utils/terrain_single.py`` with
``curriculum=False``), one world holds a row of sub-terrains of different difficulties and every
env is placed on a sub-terrain drawn uniformly at random at each reset. The envs never touch each
other (each has its own ``mjData``); the sub-terrains are spaced :data:`SUB_TERRAIN_SPACING` apart
along world y so that each robot only ever meets its own.

Frames: world z-up, the ground plane at z = 0 on every terrain. Each sub-terrain has an *anchor*,
a point on the ground at x = 0 that start poses are measured from:

* **platform**: the anchor is the middle of the box's +x edge; the box (HoST ``hurdle_terrain``)
  spans x in [-4, 0] m and is 6 m wide (y).
* **wall / slope**: the anchor is the middle of the ramp's foot line; the ramp rises toward -x
  with gradient d (rise per metre of run, tan of the ramp angle), capped at 1.0 m height
  (HoST ``my_sloped_terrain``). A ramp is one rotated box (the *slab*, whose top face is the
  incline) plus, where the cap is reached within :data:`RAMP_RUN`, a flat *plateau* box at the cap.
* **ground**: one sub-terrain, the plane itself, anchor at the origin.

Every terrain geom uses :data:`upright.robots.g1.TERRAIN_CONTYPE` / ``TERRAIN_CONAFFINITY`` so the
robot's collision geoms touch it and nothing else changes in the contact filter. MJX (JAX impl)
has no dynamic broad phase: it runs the narrow phase on every (robot geom, box) pair that passes
the filter. :func:`add_terrain` therefore adds MJX's ``max_geom_pairs`` numeric, which keeps, per
collision-function group, only the pairs with the closest bounding spheres, enough for every robot
geom against every box of one sub-terrain (the other sub-terrains are >= 4 m away). C MuJoCo (the
native backend) ignores that numeric and uses its own broad phase; both collide the same pairs
that can touch. MJX 3.17 has collision functions for the G1's capsules and spheres against boxes
(``capsule_convex``, ``sphere_convex``) and the plane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco

from upright.robots import g1

PLATFORM_DIFFICULTIES: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""HoST ``g1_config_platform.py`` difficulty list d (one sub-terrain each)."""
PLATFORM_SIZE = (4.0, 6.0)
"""Platform box length (x) and width (y), m (HoST ``hurdle_terrain``: 4 m x 6 m)."""

WALL_GRADIENTS: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 2.0, 2.5, 5.0, 7.5, 10.0)
"""HoST wall ramp gradients d (rise/run): 14.0 deg to 84.3 deg."""
SLOPE_GRADIENTS: tuple[float, ...] = (0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.14, 0.16, 0.18, 0.20, 0.26)
"""HoST slope gradients d (rise/run): 1.1 deg to 14.6 deg (spec: d in {0.02 ... 0.2, 0.26})."""
RAMP_CAP_HEIGHT = 1.0
"""Ramps stop rising at this height, m (HoST ``my_sloped_terrain`` caps the height field at 1.0 m)."""
RAMP_RUN = 5.0
"""Horizontal extent of a ramp sub-terrain from its foot toward -x, m (slab, then plateau once capped)."""
RAMP_WIDTH = 6.0
"""Ramp width along y, m (as the platform)."""
RAMP_THICKNESS = 0.3
"""Slab thickness normal to the incline, m (thick enough that no capsule passes through it)."""
SUB_TERRAIN_SPACING = 10.0
"""Distance between neighbouring sub-terrain anchors along y, m (>= 4 m of empty ground between them)."""

TERRAIN_FRICTION = (0.8, 0.005, 0.0001)
"""Sliding/torsional/rolling friction of terrain boxes; sliding 0.8 as the HoST ground plane."""
TERRAIN_RGBA = (0.55, 0.5, 0.42, 1.0)
"""Colour of terrain boxes."""

TERRAIN_NAMES: tuple[str, ...] = ("ground", "platform", "wall", "slope")
"""Terrains of the standup task (``terrain=<name>``)."""


def platform_height(difficulty: float) -> float:
    """Platform box height, m, for HoST difficulty d: (20 + 80 d) x 0.005 (0.22 m at d = 0.3, 0.46 m at 0.9)."""
    return (20.0 + 80.0 * difficulty) * 0.005


@dataclass(frozen=True)
class SubTerrain:
    """One sub-terrain of a terrain row (see the module docstring for the anchor convention)."""

    name: str
    """Name prefix of its geoms (e.g. ``platform3``)."""
    difficulty: float
    """HoST difficulty: platform d (height (20 + 80 d) x 0.005 m) or ramp gradient d (rise/run); 0 for ground."""
    anchor: tuple[float, float]
    """World (x, y) of the anchor, m."""
    height: float = 0.0
    """Platform top height z, m (0 for other terrains)."""
    gradient: float = 0.0
    """Ramp rise per metre of run toward -x (tan of the ramp angle); 0 for ground and platform."""
    geoms: tuple[str, ...] = ()
    """Names of its geoms in the compiled model."""

    @property
    def angle(self) -> float:
        """Ramp angle above horizontal, rad (atan of the gradient)."""
        return math.atan(self.gradient)

    def surface_height(self, run: float) -> float:
        """Terrain height z, m, at ``run`` metres from the anchor toward -x (negative: in front of it)."""
        if self.height > 0.0:
            return self.height if 0.0 <= run <= PLATFORM_SIZE[0] else 0.0
        if self.gradient > 0.0 and 0.0 <= run <= RAMP_RUN:
            return min(run * self.gradient, RAMP_CAP_HEIGHT)
        return 0.0


@dataclass(frozen=True)
class TerrainLayout:
    """The sub-terrains of one terrain, in model order."""

    terrain: str
    sub_terrains: tuple[SubTerrain, ...]

    @property
    def boxes_per_sub_terrain(self) -> int:
        """Most geoms any one sub-terrain has (0 for ground)."""
        return max(len(s.geoms) for s in self.sub_terrains)


def check_terrain(terrain: str) -> None:
    """Raise ValueError naming the valid terrains if ``terrain`` is not one."""
    if terrain not in TERRAIN_NAMES:
        raise ValueError(f"Unknown terrain '{terrain}'. Valid terrains: {', '.join(TERRAIN_NAMES)} (terrain=<name>).")


def _row_y(index: int, count: int) -> float:
    return (index - (count - 1) / 2.0) * SUB_TERRAIN_SPACING


def _ramp_geoms(name: str, gradient: float) -> tuple[str, ...]:
    capped = gradient * RAMP_RUN > RAMP_CAP_HEIGHT
    return (f"{name}_slab", f"{name}_plateau") if capped else (f"{name}_slab",)


def terrain_layout(terrain: str) -> TerrainLayout:
    """The sub-terrains of ``terrain`` (deterministic; :func:`add_terrain` builds exactly these).

    Raises:
        ValueError: unknown terrain (the message lists the valid ones).
    """
    check_terrain(terrain)
    if terrain == "ground":
        return TerrainLayout(terrain, (SubTerrain("ground", 0.0, (0.0, 0.0), geoms=("floor",)),))
    if terrain == "platform":
        n = len(PLATFORM_DIFFICULTIES)
        subs = tuple(
            SubTerrain(f"platform{i}", d, (0.0, _row_y(i, n)), height=platform_height(d), geoms=(f"platform{i}_box",))
            for i, d in enumerate(PLATFORM_DIFFICULTIES)
        )
        return TerrainLayout(terrain, subs)
    grads = WALL_GRADIENTS if terrain == "wall" else SLOPE_GRADIENTS
    n = len(grads)
    subs = tuple(
        SubTerrain(f"{terrain}{i}", d, (0.0, _row_y(i, n)), gradient=d, geoms=_ramp_geoms(f"{terrain}{i}", d))
        for i, d in enumerate(grads)
    )
    return TerrainLayout(terrain, subs)


def _add_box(spec: mujoco.MjSpec, name: str, center, half_size, quat=(1.0, 0.0, 0.0, 0.0)) -> None:
    spec.worldbody.add_geom(
        name=name,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        pos=list(center),
        size=list(half_size),
        quat=list(quat),
        friction=list(TERRAIN_FRICTION),
        rgba=list(TERRAIN_RGBA),
        contype=g1.TERRAIN_CONTYPE,
        conaffinity=g1.TERRAIN_CONAFFINITY,
    )


def _add_ramp(spec: mujoco.MjSpec, sub: SubTerrain) -> None:
    """Slab whose top face runs from the foot (anchor, z = 0) up toward -x at ``sub.angle``; plateau at the cap."""
    theta, (x0, y0) = sub.angle, sub.anchor
    run = min(RAMP_RUN, RAMP_CAP_HEIGHT / sub.gradient)  # horizontal extent of the incline
    length = run / math.cos(theta)
    normal = (math.sin(theta), math.cos(theta))  # (x, z) of the incline's outward normal
    top_mid = (x0 - run / 2.0, run * sub.gradient / 2.0)
    t = RAMP_THICKNESS
    center = (top_mid[0] - normal[0] * t / 2.0, y0, top_mid[1] - normal[1] * t / 2.0)
    # rotation by +theta about y: box x-axis -> (cos, 0, -sin) (downhill), box z-axis -> the normal
    quat = (math.cos(theta / 2.0), 0.0, math.sin(theta / 2.0), 0.0)
    _add_box(spec, sub.geoms[0], center, (length / 2.0, RAMP_WIDTH / 2.0, t / 2.0), quat)
    if len(sub.geoms) > 1:  # plateau at the cap height, from the top of the incline to the end of the run
        plen = RAMP_RUN - run
        h = RAMP_CAP_HEIGHT
        _add_box(spec, sub.geoms[1], (x0 - run - plen / 2.0, y0, h / 2.0), (plen / 2.0, RAMP_WIDTH / 2.0, h / 2.0))


def add_terrain(spec: mujoco.MjSpec, terrain: str) -> TerrainLayout:
    """Add the sub-terrain boxes of ``terrain`` (none for ground) to ``spec``'s world body.

    The floor plane is not added here (the scene adds it for every terrain). For terrains with
    boxes, also adds the MJX numeric ``max_geom_pairs`` = max(boxes per sub-terrain x robot collision
    geoms, explicit contact pairs), so that MJX's bounding-sphere cull keeps every pair of the robot
    with its own sub-terrain and every self-collision pair (see the module docstring).

    Args:
        spec: the scene spec, with the robot already in it (its collision geoms are counted).
        terrain: one of :data:`TERRAIN_NAMES`.

    Returns:
        The layout of what was added.

    Raises:
        ValueError: unknown terrain.
    """
    layout = terrain_layout(terrain)
    if terrain == "ground":
        return layout
    for sub in layout.sub_terrains:
        if sub.height > 0.0:
            lx, ly = PLATFORM_SIZE
            x0, y0 = sub.anchor
            _add_box(spec, sub.geoms[0], (x0 - lx / 2.0, y0, sub.height / 2.0), (lx / 2.0, ly / 2.0, sub.height / 2.0))
        else:
            _add_ramp(spec, sub)
    robot_geoms = sum(1 for g in spec.geoms if g.contype == g1.ROBOT_CONTYPE and g.conaffinity == g1.ROBOT_CONAFFINITY)
    npair = len(list(spec.pairs))
    spec.add_numeric(name="max_geom_pairs", data=[float(max(layout.boxes_per_sub_terrain * robot_geoms, npair))])
    return layout
