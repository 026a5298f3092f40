"""The command line of ``upright-policy-server`` (:func:`upright.vla.server.main`): options, their checks, and
one-line errors (exit code 2, no traceback) for every mistake.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

import numpy as np

from upright.vla.keymap import DEFAULT_KEY_MAP
from upright.vla.server_guard import API_KEY_ENV, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SEND_TIMEOUT_S, one_line
from upright.vla.server_metadata import DEFAULT_HOST, DEFAULT_MAX_BATCH, DEFAULT_PORT


class _OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors in one line (``PROG: error: ...; --help for usage``), exit code 2."""

    def error(self, message: str):
        fail(f"{one_line(message, 400)}; --help for usage")


def fail(message: str) -> None:
    """Exit 2 with ``upright-policy-server: error: <message>`` (one line) on stderr: every CLI mistake, no traceback."""
    print(f"upright-policy-server: error: {one_line(message, 600)}", file=sys.stderr)
    raise SystemExit(2)


def _port(text: str) -> int:
    """``--port`` value: an integer in 0..65535 (0: any free port).

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give 1..65535 (0: any free port)")
    return port


def _positive(kind: type) -> Callable[[str], int | float]:
    """An argparse type: a number of ``kind`` > 0 (``argparse.ArgumentTypeError`` otherwise)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0 or (kind is float and not np.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text!r}: give {'an integer' if kind is int else 'a number'} > 0")
        return value

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``upright-policy-server`` (``api_key`` falls back to ``$UPRIGHT_POLICY_SERVER_API_KEY``).

    Raises:
        SystemExit: code 2 with one line on stderr, for any mistake (:func:`fail`); 0 for ``--help``.
    """
    p = _OneLineParser(
        prog="upright-policy-server",
        description="Serve a ChunkPolicy over openpi's websocket protocol (any openpi client, or "
        "upright.vla.remote.RemotePolicy, can use it). Requests: one openpi observation; replies: "
        "{'actions': (H, A) float32, 'server_timing': {...}}.",
    )
    p.add_argument(
        "--policy",
        required=True,
        help="MODULE:FACTORY (e.g. upright.vla.linear:make_linear_policy) or a file a registered loader "
        "reads (upright.vla.loaders)",
    )
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the factory or loader (a string; repeatable)",
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help="bind address (default 127.0.0.1: this machine only; --host 0.0.0.0 serves every interface: "
        "set --api-key, and use trusted networks only: ws:// is not encrypted)",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help="TCP port, 1..65535 (default 8000, as openpi's; 0: any free port)",
    )
    p.add_argument(
        "--key-map",
        action="append",
        default=[],
        metavar="OPENPI_KEY=LEROBOT_KEY",
        help="map an openpi observation key to a LeRobot batch key, replacing the default for that "
        "LeRobot key (repeatable); defaults: " + ", ".join(f"{k}={v}" for k, v in DEFAULT_KEY_MAP.items()),
    )
    p.add_argument(
        "--max-batch",
        type=_positive(int),
        default=DEFAULT_MAX_BATCH,
        help=f"most pipelined requests of one connection answered by one policy call (default "
        f"{DEFAULT_MAX_BATCH}; 1: every request alone, as openpi's server)",
    )
    p.add_argument(
        "--max-message-bytes",
        type=_positive(int),
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help=f"largest request accepted, bytes (default {DEFAULT_MAX_MESSAGE_BYTES}: 4 MiB, e.g. four "
        "480x640x3 uint8 images and a state; a larger one closes its connection with code 1009)",
    )
    p.add_argument(
        "--send-timeout",
        type=_positive(float),
        default=DEFAULT_SEND_TIMEOUT_S,
        metavar="SECONDS",
        help=f"drop a client that has not read a reply for this long (default {DEFAULT_SEND_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--api-key",
        default=None,
        help=f"require 'Authorization: Api-Key <KEY>' at the handshake (openpi-client: "
        f"WebsocketClientPolicy(host, port, api_key=KEY)); default ${API_KEY_ENV} (prefer it: a "
        "command line is visible to every user in ps)",
    )
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    args = p.parse_args(argv)
    if args.api_key is None:
        args.api_key = os.environ.get(API_KEY_ENV) or None
    elif not args.api_key.strip():
        fail("--api-key is empty: give a key, or leave it out for no authentication")
    if not isinstance(logging.getLevelName(args.log_level.upper()), int):
        fail(f"--log-level {args.log_level!r}: give DEBUG, INFO, WARNING or ERROR")
    args.kwargs = {}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--arg {item!r}: write KEY=VALUE")
        args.kwargs[key] = value
    return args
