"""MuJoCo model → viser scene: one frame per body, the visible geoms as viser primitives or meshes under it.

Geoms shown: groups 0–2 (MuJoCo's default visible groups) with non-zero alpha. Planes become a grid
with a ground plane; spheres, boxes, cylinders, capsules, ellipsoids and meshes become viser meshes
with the geom's (or its material's) colour. Height fields are skipped (none in our scenes yet). Meshes
above ``max_faces`` faces are simplified by vertex clustering so that the browser stays fast.
"""

from __future__ import annotations

import mujoco
import numpy as np

VISIBLE_GROUPS = (0, 1, 2)


def _rgb255(rgba: np.ndarray) -> tuple[int, int, int]:
    return tuple(int(round(float(c) * 255)) for c in np.clip(rgba[:3], 0.0, 1.0))  # type: ignore[return-value]


def geom_rgba(model: mujoco.MjModel, g: int) -> np.ndarray:
    """The colour MuJoCo draws geom ``g`` with: its material's rgba if it has one, else its own."""
    mat = int(model.geom_matid[g])
    return np.asarray(model.mat_rgba[mat] if mat >= 0 else model.geom_rgba[g], np.float64)


def _cluster(vertices: np.ndarray, faces: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    keys = np.floor((vertices - vertices.min(axis=0)) / cell).astype(np.int64)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    f = inverse[faces]
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])]
    _, first = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
    f = f[np.sort(first)]
    count = np.bincount(inverse).astype(np.float64)
    v = np.zeros((len(count), 3))
    np.add.at(v, inverse, vertices)
    return (v / count[:, None]).astype(np.float32), f.astype(np.uint32)


def cluster_simplify(vertices: np.ndarray, faces: np.ndarray, max_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertex-clustering simplification to at most about ``max_faces`` faces (shape kept, small details merged)."""
    vertices, faces = np.asarray(vertices, np.float64), np.asarray(faces, np.int64)
    if len(faces) <= max_faces:
        return vertices.astype(np.float32), faces.astype(np.uint32)
    extent = float(np.ptp(vertices, axis=0).max()) or 1.0
    cell = extent / 128.0
    while True:
        v, f = _cluster(vertices, faces, cell)
        if len(f) <= max_faces or cell > extent:
            return v, f
        cell *= 1.25


def primitive_mesh(geom_type: int, size: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Vertices and faces of a MuJoCo primitive in its geom frame (None for planes/height fields)."""
    import trimesh

    t = mujoco.mjtGeom
    if geom_type == t.mjGEOM_SPHERE:
        m = trimesh.creation.icosphere(subdivisions=2, radius=float(size[0]))
    elif geom_type == t.mjGEOM_ELLIPSOID:
        m = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        m.vertices = m.vertices * np.asarray(size[:3])
    elif geom_type == t.mjGEOM_CAPSULE:
        m = trimesh.creation.capsule(height=2.0 * float(size[1]), radius=float(size[0]), count=[12, 12])
    elif geom_type == t.mjGEOM_CYLINDER:
        m = trimesh.creation.cylinder(radius=float(size[0]), height=2.0 * float(size[1]), sections=24)
    elif geom_type == t.mjGEOM_BOX:
        m = trimesh.creation.box(extents=2.0 * np.asarray(size[:3]))
    else:
        return None
    return np.asarray(m.vertices, np.float32), np.asarray(m.faces, np.uint32)


def add_model(server, model: mujoco.MjModel, root: str = "/mujoco", max_faces: int = 4000) -> dict[int, object]:
    """Add ``model``'s visible geoms to ``server``'s scene; return body id → frame handle (bodies > 0 with geoms).

    Update poses with :func:`update_poses` after each step. World-body geoms (the floor) are static.
    """
    handles: dict[int, object] = {}
    for b in range(1, model.nbody):
        if np.any((model.geom_bodyid == b) & np.isin(model.geom_group, VISIBLE_GROUPS)):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
            handles[b] = server.scene.add_frame(f"{root}/{name}", show_axes=False)
    for g in range(model.ngeom):
        if int(model.geom_group[g]) not in VISIBLE_GROUPS:
            continue
        rgba = geom_rgba(model, g)
        if rgba[3] <= 0.0:
            continue
        b = int(model.geom_bodyid[g])
        gname = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
        parent = f"{root}/{mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or f'body{b}'}" if b > 0 else root
        gtype = int(model.geom_type[g])
        pose = {"position": tuple(model.geom_pos[g]), "wxyz": tuple(model.geom_quat[g])}
        if gtype == mujoco.mjtGeom.mjGEOM_PLANE:
            sx, sy = model.geom_size[g, :2]
            w, h = (2 * sx if sx > 0 else 20.0), (2 * sy if sy > 0 else 20.0)
            server.scene.add_grid(
                f"{parent}/{gname}",
                width=w,
                height=h,
                plane="xy",
                cell_size=0.5,
                section_size=1.0,
                plane_color=(58, 76, 98),
                plane_opacity=1.0,
                cell_color=(96, 116, 140),
                section_color=(130, 150, 175),
                **pose,
            )
            continue
        if gtype == mujoco.mjtGeom.mjGEOM_MESH:
            mid = int(model.geom_dataid[g])
            va, vn = int(model.mesh_vertadr[mid]), int(model.mesh_vertnum[mid])
            fa, fn = int(model.mesh_faceadr[mid]), int(model.mesh_facenum[mid])
            vertices, faces = cluster_simplify(model.mesh_vert[va : va + vn], model.mesh_face[fa : fa + fn], max_faces)
        else:
            mesh = primitive_mesh(gtype, model.geom_size[g])
            if mesh is None:
                continue
            vertices, faces = mesh
        server.scene.add_mesh_simple(
            f"{parent}/{gname}",
            vertices=vertices,
            faces=faces,
            color=_rgb255(rgba),
            opacity=None if rgba[3] >= 1.0 else float(rgba[3]),
            **pose,
        )
    return handles


def update_poses(handles: dict[int, object], data: mujoco.MjData) -> None:
    """Move each body frame to its pose in ``data`` (``xpos``, ``xquat``)."""
    for b, h in handles.items():
        h.position = tuple(float(x) for x in data.xpos[b])  # type: ignore[attr-defined]
        h.wxyz = tuple(float(x) for x in data.xquat[b])  # type: ignore[attr-defined]
