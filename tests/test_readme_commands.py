"""Every shell command in README.md parses and resolves, without training, simulating or installing anything.

The README's fenced ``bash`` blocks are read as a user would paste them (``\\`` continuations joined, ``&&`` chains
split, ``# ...`` comments dropped). Each command is checked cheaply, in this process:

- ``python train.py ...`` / ``python play.py ...``: the overrides compose into the config, as the scripts' own
  validation does before Hydra runs (:func:`upright.conf.validate.validate_overrides`); ``policy=``/``replay=`` files
  that the repository ships exist.
- ``python -m MODULE ...``, ``upright-deploy ...``, ``upright-policy-server ...``, ``python benchmarks/X.py ...``: the
  module or script exists and its argparse parser accepts the arguments (parsing stops the command before it does
  anything: :func:`parse_only`).
- ``pip install ...``: the extras exist in ``pyproject.toml``, local paths exist, and the pinned torch is the one
  installed here.
- any argument that names a path inside a folder of the repository (``assets/``, ``docs/``, ...) exists.

A line whose comment says ``needs a GPU`` or ``needs the internet`` is skipped with that reason. Paths under
``logs/``, ``runs/``, ``data/`` and ``deploy_data`` are outputs of earlier commands and are not required to exist;
``<...>`` marks a placeholder the user fills in.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import pathlib
import re
import runpy
import shlex
import sys
import tomllib
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SKIP_MARKS = ("needs a GPU", "needs the internet")
"""Comment text that marks a README command as not runnable on a CPU-only, offline machine (the skip reason)."""
PROGRAMS = ("python", "pip", "upright-deploy", "upright-policy-server", "tensorboard")
"""The programs README commands may start with; anything else is reported (a typo, or a tool to add a check for)."""


@dataclass(frozen=True)
class Command:
    line: int
    """1-based line of README.md where the command starts."""
    argv: tuple[str, ...]
    comment: str
    """The line's ``# ...`` comment (where the skip marks are)."""

    def __str__(self) -> str:
        return f"README.md:{self.line}: {shlex.join(self.argv)}"


def split_comment(line: str) -> tuple[str, str]:
    """(``command``, ``comment``) of one shell line: the first ``#`` outside quotes that starts a word."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def readme_commands(text: str) -> list[Command]:
    """The commands of the fenced ``bash`` blocks of ``text``: continuations joined, ``&&`` chains split, comment
    lines dropped; ``a | b | c`` after a subcommand (the README's list of ``ctl`` commands) expands to one command per
    alternative."""
    commands = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```bash":
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            start, (code, comment) = i, split_comment(lines[i])
            while code.endswith("\\") and i + 1 < len(lines):
                i += 1
                more, more_comment = split_comment(lines[i])
                code, comment = code[:-1] + " " + more.strip(), " ".join(filter(None, (comment, more_comment)))
            i += 1
            if not code.strip():
                continue
            for part in code.split("&&"):
                words = shlex.split(part)
                if "|" in words:  # "upright-deploy ctl takeover | release | ...": alternatives of the last word
                    first = words.index("|")
                    head, alternatives = words[: first - 1], [w for w in words[first - 1 :] if w != "|"]
                    commands += [Command(start + 1, (*head, alt), comment) for alt in alternatives]
                else:
                    commands.append(Command(start + 1, tuple(words), comment))
    return commands


class Parsed(Exception):
    """Raised once a CLI's argparse parser has accepted its arguments: the command goes no further."""


@contextlib.contextmanager
def parse_only():
    """Make the outermost ``ArgumentParser.parse_args``/``parse_known_args`` call raise :class:`Parsed` when it
    returns (after argparse's own checks, e.g. unrecognised arguments); a parsing error stays ``SystemExit(2)``."""
    original = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    depth = [0]

    def wrap(method):
        def parse(self, *args, **kwargs):
            depth[0] += 1
            try:
                result = method(self, *args, **kwargs)
            finally:
                depth[0] -= 1
            if depth[0] == 0:
                raise Parsed(result)
            return result

        return parse

    argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = map(wrap, original)
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = original


def run_parser(run, argv0: str, args: tuple[str, ...]) -> None:
    """Run ``run()`` (a module's or script's main) with ``sys.argv = [argv0, *args]`` until its parser accepts the
    arguments.

    Raises:
        AssertionError: the parser refused them (its message), or the command finished without parsing arguments.
    """
    argv, err, refused = sys.argv, io.StringIO(), None
    sys.argv = [argv0, *args]
    try:
        with parse_only(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            run()
    except Parsed:
        return
    except SystemExit as exit_:
        last = (err.getvalue().strip().splitlines() or ["(no message)"])[-1]
        if exit_.code not in (0, None):  # raised outside the except block: no SystemExit context in the report
            refused = f"{argv0} refused its arguments {shlex.join(args)}: {last}"
        else:
            return  # --help
    finally:
        sys.argv = argv
    if refused:
        raise AssertionError(refused)
    raise AssertionError(f"{argv0} returned without parsing arguments: this test cannot check it")


def uses_argparse(path: pathlib.Path) -> bool:
    return "argparse" in path.read_text()


def entry_points() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def is_placeholder_or_output(value: str) -> bool:
    """A path the user supplies (``<run>``, ``$VAR``, ``DIR``), or one an earlier README command writes."""
    first = value.split("/", 1)[0]
    return (
        "<" in value
        or "$" in value
        or value.isupper()
        or first in ("logs", "runs", "data", "deploy_data")
        or value.startswith(("/tmp/", "ws://", "http://", "https://"))
    )


def check_repo_paths(command: Command) -> None:
    """Every argument (or ``key=value`` value) that names a path into a folder of the repository exists."""
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    for word in command.argv[1:]:
        value = word.split("=", 1)[1] if "=" in word and not word.startswith("-") else word
        if "/" not in value or is_placeholder_or_output(value) or value.split("/", 1)[0] not in folders:
            continue
        assert (ROOT / value).exists(), f"{command}: {value} does not exist in the repository"


def check_hydra(command: Command, config_name: str) -> None:
    from upright.conf.validate import validate_overrides

    args = list(command.argv[2:])
    if config_name == "play":
        sys.path.insert(0, str(ROOT))
        try:
            from play import apply_aliases
        finally:
            sys.path.remove(str(ROOT))
        args = apply_aliases(args)
        for arg in args:
            key, _, value = arg.partition("=")
            if key in ("policy", "replay") and value not in ("zero", "random") and not is_placeholder_or_output(value):
                assert (ROOT / value).exists(), f"{command}: {key}={value} does not exist"
    error = validate_overrides(args, config_name=config_name)
    assert error is None, f"{command}: {error}"


def check_pip(command: Command) -> None:
    import torch

    words = command.argv[1:]
    assert words and words[0] == "install", f"{command}: only 'pip install' is checked here"
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for word in words[1:]:
        if word.startswith("-"):
            continue
        local = re.fullmatch(r"(\.[^\[]*)(?:\[([^\]]*)\])?", word)
        if local:  # -e . / -e ".[dev,mjx]"
            assert (ROOT / local.group(1) / "pyproject.toml").is_file(), f"{command}: {local.group(1)} is not a project"
            unknown = {e for e in (local.group(2) or "").split(",") if e} - extras
            assert not unknown, f"{command}: no extra {sorted(unknown)} in pyproject.toml (extras: {sorted(extras)})"
        elif word.startswith("torch=="):
            installed = torch.__version__.split("+")[0]
            assert word.split("==")[1] == installed, f"{command}: pins {word}, but torch {installed} is installed"


def check_command(command: Command) -> None:
    argv = command.argv
    prog = argv[0]
    assert prog in PROGRAMS, f"{command}: no check for '{prog}' (add one to {pathlib.Path(__file__).name})"
    check_repo_paths(command)
    if prog == "pip":
        return check_pip(command)
    if prog == "tensorboard":
        assert importlib.util.find_spec("tensorboard"), f"{command}: tensorboard is not installed (pip install -e .)"
        return
    if prog in entry_points():
        module, func = entry_points()[prog].split(":")
        mod = importlib.import_module(module)
        return run_parser(getattr(mod, func), prog, argv[1:])
    # python
    if argv[1] == "-m":
        module = argv[2]
        spec = importlib.util.find_spec(module)
        assert spec is not None, f"{command}: no module {module}"
        if module == "pytest":  # the test suite itself
            return
        assert uses_argparse(pathlib.Path(spec.origin)), f"{command}: {module} has no argparse parser to check"
        return run_parser(lambda: runpy.run_module(module, run_name="__main__", alter_sys=True), module, argv[3:])
    script = ROOT / argv[1]
    assert script.is_file(), f"{command}: {argv[1]} does not exist"
    if script.name in ("train.py", "play.py") and script.parent == ROOT:
        return check_hydra(command, "config" if script.name == "train.py" else "play")
    assert uses_argparse(script), f"{command}: {argv[1]} has no argparse parser to check"
    return run_parser(lambda: runpy.run_path(str(script), run_name="__main__"), str(script), argv[2:])


COMMANDS = readme_commands(README.read_text())


def test_the_readme_has_commands_to_check():
    assert len(COMMANDS) >= 10 and any(c.argv[:2] == ("python", "train.py") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"L{c.line}-{'-'.join(c.argv[:3])}"[:60])
def test_readme_command(command: Command, monkeypatch, tmp_path):
    mark = next((m for m in SKIP_MARKS if m in command.comment), None)
    if mark:
        pytest.skip(f"{command}: marked '{mark}' in the README")
    monkeypatch.chdir(ROOT)  # the README's commands run from the repository root
    check_command(command)


@pytest.mark.parametrize(
    "broken, message",
    [
        ("python train.py task=lift recipe=cartesain", "Unknown recipe 'cartesain'"),
        ("python train.py task=lift env.num_env=8", "env.num_envs"),
        ("python play.py task=lift policy=upright/assets/policies/no_such_policy", "does not exist"),
        (
            "python -m upright.training.lift_evaluate --policy upright/assets/policies/panda_lift --episods 5",
            "refused its arguments",
        ),
        ("upright-deploy ctl stat", "refused its arguments"),
        ('pip install -e ".[dev,nosuchextra]"', "no extra ['nosuchextra']"),
        ("python benchmarks/no_such_bench.py", "does not exist"),
        ("make all", "no check for 'make'"),
    ],
)
def test_a_broken_command_fails_with_the_reason(broken, message, monkeypatch):
    """The checks can fail: each broken command is refused, naming what is wrong."""
    monkeypatch.chdir(ROOT)
    (command,) = readme_commands(f"```bash\n{broken}\n```\n")
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_command(command)


def test_continuations_chains_comments_and_alternatives_are_read_as_a_shell_would():
    text = (
        "```bash\npip install -e . && python train.py task=lift  # trains\n"
        "python play.py \\\n    task=lift policy=zero   # needs a GPU\n"
        "upright-deploy ctl start | quit\n```\n```python\nimport upright\n```\n"
    )
    got = [(c.line, c.argv, c.comment) for c in readme_commands(text)]
    assert got == [
        (2, ("pip", "install", "-e", "."), "trains"),
        (2, ("python", "train.py", "task=lift"), "trains"),
        (3, ("python", "play.py", "task=lift", "policy=zero"), "needs a GPU"),
        (5, ("upright-deploy", "ctl", "start"), ""),
        (5, ("upright-deploy", "ctl", "quit"), ""),
    ]


def test_hydra_flags_are_left_to_hydra_after_the_overrides():
    from upright.conf.validate import split_hydra_flags

    assert split_hydra_flags(["task=lift", "--cfg", "job", "seed=3", "--info", "-c", "all", "--help"]) == (
        ["task=lift", "seed=3"],
        ["--cfg", "job", "--info", "-c", "all", "--help"],
    )
    assert split_hydra_flags(["--info", "task=lift"]) == (["task=lift"], ["--info"])


def test_train_py_prints_the_composed_config_with_cfg_job(tmp_path):
    """``python train.py ... --cfg job`` (the README's) prints the config and trains nothing; it used to be refused
    ('job' taken for an override), then to fail in Hydra (overrides added after the flag)."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "task=lift", "recipe=cartesian", "--cfg", "job"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "task_name: lift" in proc.stdout and "action_mode: ee_delta" in proc.stdout
    assert not (tmp_path / "logs").exists()
