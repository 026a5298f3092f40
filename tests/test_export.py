"""Checkpoint -> ONNX export CLI: the config in force is chosen, the file carries metadata, bad paths error."""

import pathlib

import pytest

from upright.conf.run_files import run_config_for
from upright.training.export import main


def test_run_config_in_force_at_checkpoint(tmp_path):
    for n in (0, 114, 330, 400):
        (tmp_path / f"config_{n}.yaml").write_text("{}")
    assert run_config_for(tmp_path / "model_399.pt").name == "config_330.yaml"
    assert run_config_for(tmp_path / "model_400.pt").name == "config_400.yaml"
    assert run_config_for(tmp_path / "model_113.pt").name == "config_0.yaml"
    with pytest.raises(FileNotFoundError, match="config_"):
        run_config_for(pathlib.Path(tmp_path / "empty" / "model_3.pt"))


def test_missing_checkpoint_exits_with_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--checkpoint", str(tmp_path / "model_1.pt"), "--out", str(tmp_path / "out")])
    assert exc.value.code == 2 and "does not exist" in capsys.readouterr().err
