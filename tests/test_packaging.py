"""The package folder ``upright/`` installs whole: every folder of modules is a package that setuptools' find
(pyproject ``[tool.setuptools.packages.find]``) picks up, and the data the code reads ships with it."""

from __future__ import annotations

import pathlib
import tomllib

from setuptools import find_packages

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_module_folder_is_a_package_that_find_installs():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in cfg, "the package lives in upright/; no package-dir mapping"
    found = set(find_packages(str(ROOT), include=cfg["packages"]["find"]["include"]))
    folders = set()
    for module in (ROOT / "upright").rglob("*.py"):
        rel = module.parent.relative_to(ROOT)
        if "__pycache__" not in rel.parts:
            folders.add(".".join(rel.parts))
    assert folders == found, f"folders of modules without __init__.py (find skips them): {sorted(folders - found)}"


def test_package_data_covers_what_the_code_reads():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        folder = ROOT.joinpath(*package.split("."))
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"package-data {package}: {pattern} matches nothing"
    for policy in (ROOT / "upright" / "assets" / "policies").iterdir():
        assert (policy / "policy.onnx").exists() or (policy / "base_model.pt").exists(), policy
