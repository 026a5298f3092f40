"""Imports run one way (issue 35 item 5): every import of an upright module, at module level or inside a function,
goes to the same floor or a lower one, and no modules import each other in a circle.

The source is parsed with :mod:`ast` (nothing is imported). Floors, lowest first (:data:`FLOORS`): the ground floor
(standard library, numpy, pyarrow, onnxruntime: ``atomic_io``, ``gl``, ``policy_io``, ``dataset_io``, ``robots``),
``sim``, ``managers``, ``envs`` (the env core), ``tasks``, ``conf``, ``training``, ``vla``, ``viewer``, then the
consumers (``gym_envs``: the gymnasium adapters; ``deploy``: the daemon) and the entry points (``train.py``,
``play.py``, ``examples``, ``launchers``).

:data:`KNOWN_UP_ARROWS` lists arrows still to move (issue 35 item 5); it is empty: no import runs up a floor and no
import circle is left, and a new one of either fails the test.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOT_PACKAGE = {"tests", "benchmarks", "docs", "logs", "outputs", ".git", ".devstage", ".whl", "build", "shared"}

FLOORS: tuple[tuple[str, ...], ...] = (
    ("atomic_io", "gl", "policy_io", "dataset_io", "robots", "assets"),
    ("sim",),
    ("managers",),
    ("envs",),
    ("tasks",),
    ("conf",),
    ("training",),
    ("vla",),
    ("viewer",),
    ("gym_envs", "deploy"),
    ("__init__", "train", "play", "examples", "launchers"),
)
"""Top-level parts of the package, lowest floor first; a part may import its own floor and the floors below."""

KNOWN_UP_ARROWS: frozenset[tuple[str, str]] = frozenset()
"""(file, floor part it imports upwards) still to move: none left (a new one fails the test)."""


def level_of(part: str) -> int:
    """Floor index of a top-level part of the package.

    Raises:
        KeyError: the part is on no floor (add it to :data:`FLOORS`).
    """
    for i, floor in enumerate(FLOORS):
        if part in floor:
            return i
    raise KeyError(f"{part!r} is on no floor of FLOORS in tests/test_layering.py: add it where it belongs")


def package_sources(root: pathlib.Path = ROOT) -> dict[str, str]:
    """{path relative to ``root``: source} of every module of the package (``upright/...``) and of the entry points
    at the repository root (``train.py``, ``play.py``, ``examples/``); dot-folders, ``*.egg-info`` and the folders of
    :data:`NOT_PACKAGE` left out."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        folders = rel.parts[:-1]
        if rel.parts[0] in NOT_PACKAGE or "__pycache__" in folders:
            continue
        if any(part.startswith(".") or part.endswith(".egg-info") for part in folders):
            continue
        out[rel.as_posix()] = path.read_text()
    return out


def module_name(rel: str) -> str:
    """``upright.<dotted path>`` of a source file (``pkg/__init__.py`` is ``upright.pkg``)."""
    name = "upright." + rel.removeprefix("upright/").removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__") if name != "upright.__init__" else "upright"


def imports_of(source: str, module: str = "upright") -> list[str]:
    """Every ``upright.*`` module a source imports, at module level or in a function: ``from upright.a import b`` gives
    ``upright.a`` and ``upright.a.b``; ``from upright import a`` gives ``upright.a``; a relative import is resolved
    against ``module`` (the importing module's name; for a package, its ``__init__``'s). A module looked up by name at
    run time (``importlib``, as the loader registry of :mod:`upright.policy_io.registry` does) is not an import."""
    out = []
    package = module.split(".")[:-1]  # the importing module's package (``upright.pkg.__init__`` -> ``upright.pkg``)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*parent, *([base] if base else [])])
            if base == "upright" or base.startswith("upright."):
                out += ([base] if base != "upright" else []) + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("upright.")]
    return out


def _importer(rel: str) -> str:
    """The name relative imports of ``rel`` resolve against (``upright.pkg.__init__`` for a package's
    ``__init__.py``)."""
    return "upright." + rel.removeprefix("upright/").removesuffix(".py").replace("/", ".")


def part_of(rel: str) -> str:
    """Top-level part of a source path (``upright/deploy/cli.py`` -> ``deploy``; ``train.py`` -> ``train``)."""
    first = rel.removeprefix("upright/").split("/")[0]
    return first.removesuffix(".py")


def up_arrows(sources: dict[str, str]) -> set[tuple[str, str]]:
    """(file, part) for every import of a higher floor's part."""
    out = set()
    for rel, source in sources.items():
        here = level_of(part_of(rel))
        for target in imports_of(source, _importer(rel)):
            part = target.split(".")[1]
            if level_of(part) > here:
                out.add((rel, part))
    return out


def circles(sources: dict[str, str]) -> list[set[str]]:
    """The strongly connected components of more than one module in the import graph (Tarjan's algorithm)."""
    names = {module_name(rel): source for rel, source in sources.items()}
    importer = {module_name(rel): _importer(rel) for rel in sources}
    graph = {m: {t for t in imports_of(src, importer[m]) if t in names and t != m} for m, src in names.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_part_of_the_package_is_on_a_floor():
    parts = {part_of(rel) for rel in package_sources()}
    for part in parts:
        level_of(part)


def test_imports_run_down_apart_from_the_listed_ones():
    found = up_arrows(package_sources())
    new = sorted(found - KNOWN_UP_ARROWS)
    assert not new, f"imports that run up a floor (move the code, or the import, down): {new}"
    gone = sorted(KNOWN_UP_ARROWS - found)
    assert not gone, f"these listed arrows are gone: delete them from KNOWN_UP_ARROWS: {gone}"


def test_no_import_circle():
    found = circles(package_sources())
    assert not found, f"modules that import each other (move what both need into a third, lower one): {found}"


def test_the_checks_catch_an_arrow_up_and_a_circle():
    """The checkers on a synthetic package: a function-level import from sim into training, and two modules of
    managers importing each other."""
    sources = {
        "upright/sim/a.py": "def f():\n    from upright.training.runner import UprightRunner\n",
        "upright/managers/x.py": "from upright.managers.y import Y\n",
        "upright/managers/y.py": "import upright.managers.x\n",
        "upright/tasks/t.py": "from upright.sim.a import f\n",
        "upright/robots/r.py": "from upright import deploy\n",
        "upright/sim/b.py": "from ..training import runner\n",
        "upright/sim/c.py": "from .a import f\n",
    }
    assert up_arrows(sources) == {
        ("upright/sim/a.py", "training"),
        ("upright/robots/r.py", "deploy"),
        ("upright/sim/b.py", "training"),
    }
    assert circles(sources) == [{"upright.managers.x", "upright.managers.y"}]
