"""Locate robot models from MuJoCo Menagerie.

The real loader is the ``mujoco-menagerie`` package: it resolves a robot folder by name and
downloads it on first use. On machines without internet access, set ``MENAGERIE_ROOT`` to a local
folder in Menagerie layout (``$MENAGERIE_ROOT/<robot>/<entry>.xml``); the package honours it.
"""

from __future__ import annotations

import os
import pathlib

import mujoco_menagerie


class ModelNotFoundError(FileNotFoundError):
    """A robot model could not be found locally nor downloaded."""


def model_path(robot: str, entry_file: str) -> pathlib.Path:
    """Return the path of one MJCF entry point of a Menagerie robot.

    Args:
        robot: Menagerie robot name, e.g. ``"unitree_g1"``.
        entry_file: file name inside the robot folder, e.g. ``"g1_mjlab.xml"``.

    Returns:
        Absolute path of the MJCF file.

    Raises:
        ModelNotFoundError: the robot is unknown, could not be downloaded, or the folder lacks the
            entry file. The message says to set ``MENAGERIE_ROOT`` or check network access.
    """
    root = os.environ.get("MENAGERIE_ROOT")
    where = f"MENAGERIE_ROOT={root!r}" if root else "MENAGERIE_ROOT is not set"
    hint = (
        f"Set MENAGERIE_ROOT to a folder in MuJoCo Menagerie layout (containing {robot}/{entry_file}), "
        "or check network access so that the mujoco-menagerie package can download it "
        f"({where})."
    )
    try:
        folder = pathlib.Path(mujoco_menagerie.get(robot).path(progress=None))
    except mujoco_menagerie.MenagerieError as err:
        raise ModelNotFoundError(f"Robot model '{robot}' is not available: {err}. {hint}") from err
    path = folder / entry_file
    if not path.is_file():
        raise ModelNotFoundError(f"Robot model file {path} does not exist. {hint}")
    return path.resolve()
