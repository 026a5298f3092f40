"""The evaluation CLI on real physics: writes CSV and Markdown beside HoST's Table III."""

from __future__ import annotations

import csv

from upright.training import evaluate


def test_zero_policy_does_not_stand_and_files_are_written(tmp_path, capsys):
    evaluate.main(
        [
            "--policy",
            "zero",
            "--episodes",
            "4",
            "--num-envs",
            "2",
            "--episode-length-s",
            "1.0",
            "--out",
            str(tmp_path),
            "sim.num_threads=1",
        ]
    )
    rows = list(csv.DictReader(open(tmp_path / "eval.csv")))
    assert rows[0]["terrain"] == "ground" and rows[0]["episodes"] == "4"
    assert float(rows[0]["E_succ"]) == 0.0  # lying still never reaches 0.7 m
    md = (tmp_path / "eval.md").read_text()
    assert "HoST Table III" in md and "99.50" in md
    assert "| ground | upright | 4 |" in capsys.readouterr().out
    assert "domain randomisation on" in md  # HoST's evaluation keeps it on


def test_no_domain_rand_flag_is_applied_and_reported(tmp_path, monkeypatch):
    made = []
    make_env = evaluate.make_env
    monkeypatch.setattr(evaluate, "make_env", lambda *a, **k: made.append(make_env(*a, **k)) or made[-1])
    evaluate.main(
        [
            "--policy",
            "zero",
            "--episodes",
            "1",
            "--num-envs",
            "1",
            "--episode-length-s",
            "0.1",
            "--no-domain-rand",
            "--out",
            str(tmp_path),
            "sim.num_threads=1",
        ]
    )
    assert made[0].randomizer.enabled is False
    assert "domain randomisation off (--no-domain-rand)" in (tmp_path / "eval.md").read_text()


def test_evaluate_dispatches_by_the_task_spec_and_refuses_a_task_without_an_evaluator(capsys):
    import pytest

    from upright.training.evaluate import main

    for args, message in (
        (["--task", "reach", "--policy", "zero"], "error: task=reach has no evaluation protocol"),
        (["--task=walk", "--policy", "zero"], "error: Unknown task 'walk'. Valid tasks: lift, reach, standup"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.startswith(message) and err.count("\n") == 1, err
    with pytest.raises(SystemExit):  # lift's evaluator (training/lift_evaluate.py) parses its own options
        main(["--task", "lift", "--help"])
    assert "lift" in capsys.readouterr().out
