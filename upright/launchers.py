"""Console-script entry points that check their extra is installed before importing it.

``upright-policy-server`` serves a chunked policy with torch, websockets and msgpack, which the robot computer's slim
install (``pip install upright``: numpy, onnxruntime, pyserial, pyarrow) does not have; started there, it says so in
one line with the install command instead of a traceback. Standard library only.
"""

from __future__ import annotations

import importlib.util
import sys

SERVER_MODULES = ("torch", "websockets", "msgpack")
"""Modules ``upright-policy-server`` needs beyond the base install (the ``train`` extra has them)."""


def missing(modules: tuple[str, ...]) -> list[str]:
    """The names of ``modules`` that cannot be imported here (found by ``importlib.util.find_spec``)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def policy_server(argv: list[str] | None = None) -> None:
    """``upright-policy-server`` (:func:`upright.vla.server.main`); exits 2 with one line when its extra is missing."""
    absent = missing(SERVER_MODULES)
    if absent:
        print(
            f"error: upright-policy-server needs {', '.join(absent)} (not in the robot computer's slim install): "
            "pip install 'upright[train]'",
            file=sys.stderr,
        )
        raise SystemExit(2)
    from upright.vla.server import main

    main(argv)
