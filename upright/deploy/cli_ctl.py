"""``upright-deploy ctl``: one operator command to a running daemon."""

from __future__ import annotations

import json
import sys


class CtlUsageError(ValueError):
    """Bad ``ctl`` arguments (the message is the one line to print)."""


def ctl_request(command: str, items: list[str]) -> dict:
    """The request of ``ctl COMMAND ITEMS...``: ``target`` takes JOINT=RAD items, every other command none.

    Joint names and limits are checked by the daemon (it knows the policy), which answers with the valid ones.

    Raises:
        CtlUsageError: arguments given to a command that takes none, or a target item that is not JOINT=number.
    """
    if command != "target":
        if items:
            raise CtlUsageError(
                f"'{command}' takes no arguments (got {' '.join(items)}); only 'target' takes JOINT=RAD"
            )
        return {"cmd": command}
    if not items:
        raise CtlUsageError(
            "'target' needs JOINT=RAD pairs, e.g. ctl target left_knee_joint=0.5 "
            "(absolute joint angles in rad, HUMAN mode only)"
        )
    targets: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CtlUsageError(f"'{item}' is not JOINT=RAD, e.g. left_knee_joint=0.5")
        try:
            targets[name.strip()] = float(value)
        except ValueError:
            raise CtlUsageError(f"'{item}': RAD must be a number (radians), e.g. {name.strip()}=0.5") from None
    return {"cmd": "target", "targets": targets}


def cmd_ctl(args) -> int:
    from upright.deploy.operator_socket import default_socket_path, resolve_user, send_command

    try:
        req = ctl_request(args.command, args.args)
        daemon_users = tuple(resolve_user(u) for u in args.daemon_user or ())
    except ValueError as err:
        print(f"upright-deploy ctl: {err}", file=sys.stderr)
        return 2
    try:
        reply = send_command(args.socket or default_socket_path(), req, timeout=args.timeout, daemon_users=daemon_users)
    except ConnectionError as err:
        print(f"upright-deploy ctl: {err}", file=sys.stderr)
        return 2
    print(json.dumps(reply))
    if not reply.get("ok"):
        print(f"upright-deploy ctl: {reply.get('error', 'refused')}", file=sys.stderr)
        return 1
    return 0
