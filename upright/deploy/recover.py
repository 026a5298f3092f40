"""``upright-deploy recover DS``: convert the journals a crashed run left in a dataset into its episodes."""

from __future__ import annotations

import json
import pathlib
import sys


def cmd_recover(args) -> int:
    """``upright-deploy recover DS``: convert the journals a crash left into episodes (outcome ``interrupted``).

    Prints ``{"recovered_episodes": [...], "total_episodes": N, "quarantined": [...]}`` and exits 0. Refusals and
    failures are one line on stderr: exit 2 when ``DS`` is damaged or not a folder
    (:func:`~upright.dataset_io.check.check_dataset`, first: nothing is written, not even the lock file), holds no
    dataset, or another process holds its writer lock (a daemon records it: no journal is read, nothing written),
    exit 1 when a write fails (a full disk, EIO): the journal being converted and every later one are kept, the
    dataset stays as it was after its last whole episode. A journal that cannot be read is moved to
    ``journal/quarantine/`` (named on stderr), never deleted.
    """
    from upright.dataset_io.check import DatasetError, check_dataset, read_info
    from upright.dataset_io.lerobot import IMPLICIT_FEATURES, LeRobotV3Writer
    from upright.dataset_io.lock import DatasetLock, DatasetLockedError

    root = pathlib.Path(args.dataset)
    info_path = root / "meta" / "info.json"
    try:
        checked = check_dataset(root)
    except DatasetError as err:
        print(f"upright-deploy recover: refusing: {err}; nothing was changed", file=sys.stderr)
        return 2
    journals = sorted((root / "journal").glob("episode_*.arrows"))
    if checked is None and not journals:
        print(f"upright-deploy recover: {args.dataset} holds no dataset", file=sys.stderr)
        return 2
    try:
        lock = DatasetLock.acquire(root, "upright-deploy recover", create=False)
    except DatasetLockedError as err:
        print(
            f"upright-deploy recover: refusing: {err}; a daemon is recording it: recover it after that daemon exits",
            file=sys.stderr,
        )
        return 2
    except OSError as err:
        print(f"upright-deploy recover: cannot lock {root}: {err}", file=sys.stderr)
        return 1
    try:
        if not info_path.is_file():
            print(
                "upright-deploy recover: journals without meta/info.json; run the daemon once on this folder to "
                "recover",
                file=sys.stderr,
            )
            return 2
        writer = None
        try:
            info = read_info(info_path)
            features = {k: v for k, v in info["features"].items() if k not in IMPLICIT_FEATURES}
            writer = LeRobotV3Writer(root, features, info["fps"], info.get("robot_type", ""))
            done = writer.recover(info.get("upright", {}).get("task", "unknown"))
        except DatasetError as err:  # damaged since the check
            print(f"upright-deploy recover: refusing: {err}; nothing was changed", file=sys.stderr)
            return 2
        except (ValueError, KeyError) as err:
            print(
                f"upright-deploy recover: {info_path} does not read back ({type(err).__name__}: {err})", file=sys.stderr
            )
            return 2
        except OSError as err:  # a full disk, EIO: one line; every file as it was (journals kept)
            print(
                f"upright-deploy recover: cannot write {root}: {err}; nothing is lost: run recover again once "
                "there is room",
                file=sys.stderr,
            )
            return 1
        finally:
            for src, dst, why in writer.quarantined if writer is not None else ():
                print(f"upright-deploy recover: {src} cannot be converted ({why}); kept as {dst}", file=sys.stderr)
    finally:
        lock.close()
    print(
        json.dumps(
            {
                "recovered_episodes": done,
                "total_episodes": writer.info["total_episodes"],
                "quarantined": [str(dst) for _, dst, _ in writer.quarantined],
            }
        )
    )
    return 0
