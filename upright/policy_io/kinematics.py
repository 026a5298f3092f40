"""Serial-chain kinematics and the differential IK step of an end-effector action, in numpy alone.

A lift policy's action (``action_mode: ee_delta``) moves the gripper site; turning that into joint targets needs the
arm's forward kinematics, its site Jacobian and its gravity torques. The training env computes them with MuJoCo
(:class:`upright.tasks.lift.ik.DifferentialIK`); the robot computer's daemon imports no MuJoCo, so the policy file
carries the chain (``kinematic_chain``, written by :func:`upright.tasks.lift.ik.chain_from_model` from the compiled
model) and this module computes the same quantities from it: MuJoCo's own conventions (body pose = parent pose ∘
(``body_pos``, ``body_quat``) ∘ joint motion; hinge rotation about ``axis`` through ``anchor``, slide translation
along ``axis``; quaternions w, x, y, z), so the results agree with ``mj_kinematics`` / ``mj_jacSite`` / ``mj_rne`` to
rounding (``tests/test_kinematics.py``).

The IK step (:func:`dls_joint_step`) and the anti-windup bounds are the lift env's, defined here once so the env and
the daemon run the same code. World frame: the chain's base (the robot's mounting) at the origin, z up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHAIN_KEYS = ("links", "site_link", "site_pos", "site_quat", "gravity", "num_q")
"""Keys of a ``kinematic_chain`` metadata value."""
LINK_KEYS = ("name", "parent", "pos", "quat", "joint_type", "axis", "anchor", "q_index", "mass", "com")
"""Keys of each entry of its ``links``."""
JOINT_TYPES = ("fixed", "hinge", "slide")


def quat_to_matrix(quat: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices (body-to-parent) of quaternions ``quat`` (..., 4) (w, x, y, z; normalised here)."""
    q = np.asarray(quat, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def _axis_angle(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotations by ``angle`` (N,) rad about the unit ``axis`` (3,) (Rodrigues)."""
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + s * k + (1 - c) * (k @ k)


@dataclass(frozen=True)
class Link:
    """One body of the chain, in its parent's frame (MuJoCo's ``body_pos`` / ``body_quat``), with at most one joint."""

    name: str
    parent: int
    """Index of the parent link in the chain, or -1 for the base (world)."""
    pos: np.ndarray
    """(3,) m, the body frame's origin in the parent frame at q = 0."""
    quat: np.ndarray
    """(4,) w, x, y, z, the body frame's orientation in the parent frame at q = 0."""
    joint_type: str
    """``fixed``, ``hinge`` (rad) or ``slide`` (m)."""
    axis: np.ndarray
    """(3,) unit joint axis, body frame."""
    anchor: np.ndarray
    """(3,) m, a point on a hinge's axis, body frame."""
    q_index: int
    """Index of the joint's coordinate in the chain's q vector (-1: fixed)."""
    mass: float
    """kg."""
    com: np.ndarray
    """(3,) m, centre of mass, body frame."""


class KinematicChain:
    """A tree of rigid links with hinge and slide joints, a site on one link, and gravity (module docstring).

    Args:
        links: parents before children.
        site_link, site_pos, site_quat: the site's link and its pose in that link's frame (m; w, x, y, z).
        gravity: (3,) m/s², world frame.
        num_q: length of q (every ``q_index`` is below it).

    Raises:
        ValueError: a parent after its child, an unknown joint type, a q index out of range, or a bad site link.
    """

    def __init__(self, links, site_link: int, site_pos, site_quat, gravity, num_q: int):
        self.links = tuple(links)
        self.num_q = int(num_q)
        for i, link in enumerate(self.links):
            if not -1 <= link.parent < i:
                raise ValueError(f"kinematic_chain: link {link.name!r} has parent {link.parent}, not an earlier link")
            if link.joint_type not in JOINT_TYPES:
                raise ValueError(f"kinematic_chain: link {link.name!r} has joint type {link.joint_type!r}")
            if link.joint_type != "fixed" and not 0 <= link.q_index < self.num_q:
                raise ValueError(f"kinematic_chain: link {link.name!r} has q index {link.q_index} outside [0, {num_q})")
            values = np.concatenate([link.pos, link.quat, link.axis, link.anchor, link.com, [link.mass]])
            if not np.all(np.isfinite(values)) or link.mass < 0 or not np.linalg.norm(link.quat) > 0:
                raise ValueError(
                    f"kinematic_chain: link {link.name!r} has a non-finite value, a negative mass or a zero quat"
                )
            if link.joint_type != "fixed" and not np.linalg.norm(link.axis) > 1e-9:
                raise ValueError(f"kinematic_chain: link {link.name!r} has a zero joint axis")
        if not 0 <= int(site_link) < len(self.links):
            raise ValueError(f"kinematic_chain: site_link {site_link} is not a link")
        self.site_link = int(site_link)
        self.site_pos = np.asarray(site_pos, dtype=np.float64)
        self.site_quat = np.asarray(site_quat, dtype=np.float64)
        self.gravity = np.asarray(gravity, dtype=np.float64)
        shapes = (self.site_pos.shape, self.site_quat.shape, self.gravity.shape)
        if shapes != ((3,), (4,), (3,)) or not all(np.all(np.isfinite(v)) for v in (self.site_pos, self.site_quat)):
            raise ValueError("kinematic_chain: site_pos (3), site_quat (4) and gravity (3) must be finite vectors")
        if not np.all(np.isfinite(self.gravity)) or not np.linalg.norm(self.site_quat) > 0:
            raise ValueError("kinematic_chain: gravity must be finite and site_quat non-zero")
        self.site_rot = quat_to_matrix(self.site_quat)
        self._rot0 = [quat_to_matrix(link.quat) for link in self.links]

    # ------------------------------------------------------------------ metadata
    @classmethod
    def from_metadata(cls, value: dict) -> KinematicChain:
        """The chain of a policy file's ``kinematic_chain`` value (:meth:`to_metadata`).

        Raises:
            ValueError: a missing key, or values of the wrong length (one line naming it).
        """
        missing = [k for k in CHAIN_KEYS if k not in value]
        if missing:
            raise ValueError(f"kinematic_chain lacks {missing}")
        links = []
        for i, entry in enumerate(value["links"]):
            lost = [k for k in LINK_KEYS if k not in entry]
            if lost:
                raise ValueError(f"kinematic_chain link {i} lacks {lost}")
            vec = {k: np.asarray(entry[k], dtype=np.float64) for k in ("pos", "quat", "axis", "anchor", "com")}
            for key, arr in vec.items():
                if arr.shape != ((4,) if key == "quat" else (3,)):
                    raise ValueError(f"kinematic_chain link {entry['name']!r}: {key} has shape {arr.shape}")
            links.append(
                Link(
                    str(entry["name"]),
                    int(entry["parent"]),
                    joint_type=str(entry["joint_type"]),
                    q_index=int(entry["q_index"]),
                    mass=float(entry["mass"]),
                    **vec,
                )
            )
        return cls(links, value["site_link"], value["site_pos"], value["site_quat"], value["gravity"], value["num_q"])

    def to_metadata(self) -> dict:
        """The JSON-ready ``kinematic_chain`` value (:meth:`from_metadata` reads it back)."""
        return {
            "links": [
                {
                    "name": link.name,
                    "parent": link.parent,
                    "pos": link.pos.tolist(),
                    "quat": link.quat.tolist(),
                    "joint_type": link.joint_type,
                    "axis": link.axis.tolist(),
                    "anchor": link.anchor.tolist(),
                    "q_index": link.q_index,
                    "mass": link.mass,
                    "com": link.com.tolist(),
                }
                for link in self.links
            ],
            "site_link": self.site_link,
            "site_pos": self.site_pos.tolist(),
            "site_quat": self.site_quat.tolist(),
            "gravity": self.gravity.tolist(),
            "num_q": self.num_q,
        }

    # ------------------------------------------------------------------ kinematics
    def forward(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World positions (N, L, 3) m and orientations (N, L, 3, 3) (body-to-world) of every link at ``q``
        (N, num_q)."""
        q = np.asarray(q, dtype=np.float64)
        n = q.shape[0]
        pos = np.zeros((n, len(self.links), 3))
        rot = np.zeros((n, len(self.links), 3, 3))
        for i, link in enumerate(self.links):
            if link.parent < 0:
                p_par, r_par = np.zeros((n, 3)), np.broadcast_to(np.eye(3), (n, 3, 3))
            else:
                p_par, r_par = pos[:, link.parent], rot[:, link.parent]
            p = p_par + np.einsum("nij,j->ni", r_par, link.pos)
            r = r_par @ self._rot0[i]
            if link.joint_type == "hinge":
                r_joint = _axis_angle(link.axis / np.linalg.norm(link.axis), q[:, link.q_index])
                # rotation about the anchor: the origin moves by R0 (a - Rj a)
                p = p + np.einsum("nij,nj->ni", r, link.anchor - np.einsum("nij,j->ni", r_joint, link.anchor))
                r = r @ r_joint
            elif link.joint_type == "slide":
                p = p + np.einsum("nij,j->ni", r, link.axis) * q[:, link.q_index, None]
            pos[:, i], rot[:, i] = p, r
        return pos, rot

    def _ancestors(self, index: int) -> list[int]:
        out = []
        while index >= 0:
            out.append(index)
            index = self.links[index].parent
        return out

    def _point_jacobian(self, pos, rot, link_index: int, point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Translational (N, 3, num_q) and rotational (N, 3, num_q) world-frame Jacobians of world ``point`` (N, 3)
        fixed to link ``link_index``."""
        n = point.shape[0]
        jacp, jacr = np.zeros((n, 3, self.num_q)), np.zeros((n, 3, self.num_q))
        for i in self._ancestors(link_index):
            link = self.links[i]
            if link.joint_type == "fixed":
                continue
            axis = np.einsum("nij,j->ni", rot[:, i], link.axis / np.linalg.norm(link.axis))
            if link.joint_type == "hinge":
                anchor = pos[:, i] + np.einsum("nij,j->ni", rot[:, i], link.anchor)
                jacp[:, :, link.q_index] += np.cross(axis, point - anchor)
                jacr[:, :, link.q_index] += axis
            else:
                jacp[:, :, link.q_index] += axis
        return jacp, jacr

    def site_frames(self, q: np.ndarray, columns: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Site positions (N, 3) m, orientations (N, 3, 3) (site-to-world) and Jacobians (N, 6, C) at ``q`` (N, num_q):
        translation rows in the world frame, rotation rows in the site frame (as the lift IK uses them), columns the
        first ``columns`` coordinates of q (default all)."""
        pos, rot = self.forward(q)
        r_link = rot[:, self.site_link]
        site_pos = pos[:, self.site_link] + np.einsum("nij,j->ni", r_link, self.site_pos)
        site_rot = r_link @ self.site_rot
        jacp, jacr = self._point_jacobian(pos, rot, self.site_link, site_pos)
        jac = np.concatenate([jacp, np.einsum("nji,njk->nik", site_rot, jacr)], axis=1)
        return site_pos, site_rot, jac[:, :, : columns or self.num_q]

    def gravity_torques(self, q: np.ndarray) -> np.ndarray:
        """(N, num_q) generalised forces (N·m, N) that hold ``q`` (N, num_q) still against gravity (MuJoCo's ``mj_rne``
        at zero velocity and acceleration: Σ_links −J_comᵀ m g)."""
        pos, rot = self.forward(q)
        out = np.zeros((pos.shape[0], self.num_q))
        for i, link in enumerate(self.links):
            if link.mass <= 0:
                continue
            com = pos[:, i] + np.einsum("nij,j->ni", rot[:, i], link.com)
            jacp, _ = self._point_jacobian(pos, rot, i, com)
            out -= link.mass * np.einsum("nij,i->nj", jacp, self.gravity)
        return out


# ---------------------------------------------------------------------- the lift env's IK step
def orientation_error(r_cur: np.ndarray, r_des: np.ndarray) -> np.ndarray:
    """(N, 3) world-frame small-angle rotation vectors taking ``r_cur`` to ``r_des`` ((N, 3, 3) each): ½ Σ_i c_i ×
    d_i."""
    return 0.5 * np.cross(r_cur, r_des, axis=1).sum(axis=2)


def bound_lead(p_cmd: np.ndarray, p_meas: np.ndarray, translation: np.ndarray, max_lead: float) -> np.ndarray:
    """The translation (N, 3) m that replaces ``translation`` (N, 3) m so that the commanded site ``p_cmd`` (N, 3) m
    ends within ``max_lead`` m of the measured site ``p_meas`` (N, 3) m (an anti-windup clamp): ``translation``
    itself where ``p_cmd + translation`` is within the bound, else the step to the point of the ball around
    ``p_meas`` in the same direction from ``p_meas`` (which may wind the command back by more than one step)."""
    off = p_cmd + translation - p_meas
    norm = np.linalg.norm(off, axis=1, keepdims=True)
    return p_meas + off * np.minimum(1.0, max_lead / np.maximum(norm, 1e-12)) - p_cmd


def bound_lead_down(p_cmd: np.ndarray, p_meas: np.ndarray, translation: np.ndarray, max_lead_down: float) -> np.ndarray:
    """The translation (N, 3) m that replaces ``translation`` (N, 3) m so that the commanded site ``p_cmd`` (N, 3) m
    ends at most ``max_lead_down`` m below the measured site ``p_meas`` (N, 3) m (world z; a one-sided anti-windup
    clamp): only the z component is raised, and a command already further below is wound back in one step."""
    out = np.array(translation, dtype=np.float64, copy=True)
    out[:, 2] = np.maximum(out[:, 2], p_meas[:, 2] - max_lead_down - p_cmd[:, 2])
    return out


def dls_joint_step(
    q: np.ndarray,
    translation: np.ndarray,
    frames: tuple[np.ndarray, np.ndarray, np.ndarray],
    home_q: np.ndarray,
    home_rotation: np.ndarray,
    weights: np.ndarray,
    damping: float,
    null_gain: float,
    min_height: float | None = None,
) -> np.ndarray:
    """Δq (N, 7) rad, float64, that moves the site by ``translation`` (N, 3) m (world frame) from arm angles ``q``
    (N, 7) rad and turns it toward ``home_rotation`` (3, 3): damped least squares with a null-space pull toward
    ``home_q`` (7,) (:mod:`upright.tasks.lift.ik` gives the formula and its source).

    Args:
        frames: site positions (N, 3), orientations (N, 3, 3) and Jacobians (N, 6, 7) at ``q``
            (:meth:`KinematicChain.site_frames` or the env's MuJoCo ones).
        weights: (6,) task weights (translation x, y, z; rotation about the site's x, y, z).
        damping: λ. null_gain: k_null per step.
        min_height: m, world z; the translation's z is raised where it would take the site below it (None: no bound).
    """
    q = np.asarray(q, dtype=np.float64)
    dx = np.array(translation, dtype=np.float64, copy=True)
    pos, rot, jac = frames
    if min_height is not None:
        dx[:, 2] = np.maximum(dx[:, 2], min_height - pos[:, 2])
    world_err = orientation_error(rot, np.broadcast_to(home_rotation, rot.shape))
    rot_err = np.einsum("nji,nj->ni", rot, world_err)  # site frame
    e = weights * np.concatenate([dx, rot_err], axis=1)
    jw = weights[None, :, None] * jac
    gram = jw @ jw.transpose(0, 2, 1) + damping**2 * np.eye(6)
    dq = (jw.transpose(0, 2, 1) @ np.linalg.solve(gram, e[..., None]))[..., 0]
    jt = jac.transpose(0, 2, 1)  # J⁺ = Jᵀ (J Jᵀ)⁻¹ (a 1e-9 ridge for singular poses): 12x faster than an SVD
    null = np.eye(jac.shape[2]) - jt @ np.linalg.solve(jac @ jt + 1e-9 * np.eye(6), jac)
    dq += (null @ (null_gain * (home_q - q))[..., None])[..., 0]
    return dq
