"""Every sub-package folder is installed as part of `upright` (pyproject's explicit package list)."""

from __future__ import annotations

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"upright"}
    for init in ROOT.rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if (
            rel.parts
            and rel.parts[0] not in ("tests", "benchmarks", "logs", "build")
            and not any(p.startswith(".") or p.endswith(".egg-info") for p in rel.parts)
        ):
            found.add("upright." + ".".join(rel.parts))
    assert found == listed, f"missing: {sorted(found - listed)}, stale: {sorted(listed - found)}"
