"""Stage a bundle of files larger than one device call can carry onto a lent GPU machine, in chunks, across calls.

The device tool sends at most 64 MiB per call (the working tree plus the carried paths), and the ``warp-lang``
wheel alone is 149 MB. The machine keeps what a call left in ``/tmp`` while it stays warm (30 s after a call), so:

1. here, ``pack`` puts the wheels (and the Menagerie robot folders) into one ``bundle.tar.gz``, splits it into
   chunks that fit beside the working tree, and writes ``manifest.json`` (sizes and SHA-256 of every chunk and of
   the bundle) into ``.devstage/`` (ignored by git through ``.git/info/exclude``); it prints the calls to make;
2. on the device, each call carries ``.devstage/manifest.json`` and one chunk; ``receive`` checks the chunk's
   SHA-256 and moves it to ``/tmp/upright_stage``;
3. the last call's ``assemble`` checks that every chunk is there, joins them while hashing, checks the bundle's
   SHA-256 and unpacks it; ``device.sh`` then installs the wheels with ``pip install --no-index``.

Standard library only (it runs on the device before anything is installed). Usage::

    python benchmarks/device/stage.py pack --wheels .whl --menagerie ../shared/menagerie --robots unitree_g1
    python benchmarks/device/stage.py receive --src .devstage --dest /tmp/upright_stage     # each call (device.sh)
    python benchmarks/device/stage.py assemble --dest /tmp/upright_stage --extract /tmp/upright_stage/unpacked
    python benchmarks/device/stage.py join --src <returned files> --out .devstage/resume    # a returned checkpoint
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time

MiB = 2**20
CALL_LIMIT = 64 * MiB
"""What one device call may carry: the working tree that travels plus the carried paths (device README)."""
MARGIN = 3 * MiB
"""Headroom under :data:`CALL_LIMIT` (files written while staging, rounding)."""
STAGE_DIR = ".devstage"
"""Folder of the repository, ignored by git, that holds the chunks and the manifest here."""
MANIFEST = "manifest.json"
PART_BYTES = 15 * MiB
"""Largest part of a file sent back from the device (the tool returns files of at most 16 MiB)."""


def sha256(path: pathlib.Path) -> str:
    """Hex SHA-256 of a file (read in 8 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 * MiB):
            h.update(block)
    return h.hexdigest()


def tree_bytes(repo: pathlib.Path) -> int:
    """Bytes of the working tree that a device call sends: tracked and untracked-not-ignored files, and shared/."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo, capture_output=True, check=True
    ).stdout.decode()
    total = sum((repo / f).stat().st_size for f in out.split("\0") if f and (repo / f).is_file())
    shared = repo / "shared"
    if shared.is_dir():
        total += sum(p.stat().st_size for p in shared.rglob("*") if p.is_file())
    return total


def split(bundle: pathlib.Path, out_dir: pathlib.Path, chunk_bytes: int) -> dict:
    """Split ``bundle`` into ``chunk_00``, ``chunk_01``, ... of ``chunk_bytes`` (the last one shorter) in ``out_dir``;
    write and return the manifest (bundle and chunk sizes and SHA-256).

    Raises:
        ValueError: ``chunk_bytes`` <= 0.
    """
    if chunk_bytes <= 0:
        raise ValueError(f"chunk size must be > 0 bytes, got {chunk_bytes}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("chunk_*"):
        old.unlink()
    chunks = []
    with open(bundle, "rb") as src:
        while block := src.read(chunk_bytes):
            name = f"chunk_{len(chunks):02d}"
            (out_dir / name).write_bytes(block)
            chunks.append({"name": name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    manifest = {
        "bundle": bundle.name,
        "bundle_bytes": bundle.stat().st_size,
        "bundle_sha256": sha256(bundle),
        "chunks": chunks,
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def write_parts(path: pathlib.Path, out_dir: pathlib.Path, part_bytes: int, index_name: str) -> dict:
    """Write ``path`` into ``out_dir`` as ``<name>.00``, ``<name>.01``, ... of at most ``part_bytes``, with an index
    ``index_name`` (name, size, SHA-256 of the whole file and of each part); return the index. Parts are written
    first and the index last (atomically), so an index always describes complete parts."""
    parts = []
    with open(path, "rb") as src:
        while block := src.read(part_bytes):
            name = f"{path.name}.{len(parts):02d}"
            (out_dir / (name + ".tmp")).write_bytes(block)
            os.replace(out_dir / (name + ".tmp"), out_dir / name)
            parts.append({"name": name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    index = {"name": path.name, "bytes": path.stat().st_size, "sha256": sha256(path), "parts": parts}
    (out_dir / (index_name + ".tmp")).write_text(json.dumps(index, indent=1))
    os.replace(out_dir / (index_name + ".tmp"), out_dir / index_name)
    return index


def join_parts(src: pathlib.Path, index_name: str, out_dir: pathlib.Path) -> pathlib.Path:
    """Rebuild the file that :func:`write_parts` split (index ``src/index_name``) in ``out_dir``; return its path.

    Raises:
        FileNotFoundError: the index or a part is missing (the message names it).
        ValueError: the rebuilt file's size or SHA-256 differs from the index.
    """
    index = json.loads((src / index_name).read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / index["name"]
    with open(target, "wb") as out:
        for part in index["parts"]:
            if not (src / part["name"]).is_file():
                raise FileNotFoundError(f"{src / part['name']} is missing (listed in {index_name})")
            out.write((src / part["name"]).read_bytes())
    if target.stat().st_size != index["bytes"] or sha256(target) != index["sha256"]:
        target.unlink()
        raise ValueError(f"the parts in {src} do not rebuild {index['name']} (size or SHA-256): fetch them again")
    return target


def receive(src: pathlib.Path, dest: pathlib.Path) -> list[str]:
    """Move the chunks found in ``src`` into ``dest`` after checking each one's SHA-256 against the manifest.

    Returns the names of the chunks still missing from ``dest``.

    Raises:
        FileNotFoundError: no manifest in ``src`` or ``dest``.
        ValueError: a chunk does not match the manifest (size or SHA-256), or ``src`` and ``dest`` hold different
            manifests (a new bundle: empty ``dest`` first).
    """
    dest.mkdir(parents=True, exist_ok=True)
    if (src / MANIFEST).is_file():
        new = json.loads((src / MANIFEST).read_text())
        if (dest / MANIFEST).is_file() and json.loads((dest / MANIFEST).read_text()) != new:
            raise ValueError(f"{dest} holds chunks of another bundle; remove {dest} and send every chunk again")
        shutil.copyfile(src / MANIFEST, dest / MANIFEST)
    if not (dest / MANIFEST).is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {src} or {dest}: carry {STAGE_DIR}/{MANIFEST} in every call")
    manifest = json.loads((dest / MANIFEST).read_text())
    for chunk in manifest["chunks"]:
        path = src / chunk["name"]
        if not path.is_file():
            continue
        if path.stat().st_size != chunk["bytes"] or sha256(path) != chunk["sha256"]:
            raise ValueError(f"{path} does not match the manifest (size or SHA-256): send it again")
        shutil.move(str(path), dest / chunk["name"])
    return [c["name"] for c in manifest["chunks"] if not (dest / c["name"]).is_file()]


def assemble(dest: pathlib.Path, extract: pathlib.Path | None = None) -> pathlib.Path:
    """Join the chunks in ``dest`` into the bundle, check its SHA-256, and unpack it into ``extract`` if given.

    Returns the bundle's path.

    Raises:
        FileNotFoundError: a chunk is missing (the message names them: send those calls again).
        ValueError: the joined bundle's size or SHA-256 differs from the manifest.
    """
    manifest = json.loads((dest / MANIFEST).read_text())
    missing = [c["name"] for c in manifest["chunks"] if not (dest / c["name"]).is_file()]
    if missing:
        raise FileNotFoundError(
            f"chunks missing in {dest}: {', '.join(missing)} (the machine went back between "
            "calls, or a call was skipped): send them again"
        )
    bundle = dest / manifest["bundle"]
    h = hashlib.sha256()
    with open(bundle, "wb") as out:
        for c in manifest["chunks"]:
            block = (dest / c["name"]).read_bytes()
            h.update(block)
            out.write(block)
    if bundle.stat().st_size != manifest["bundle_bytes"] or h.hexdigest() != manifest["bundle_sha256"]:
        raise ValueError(f"{bundle}: joined chunks differ from the manifest (size or SHA-256)")
    if extract is not None:
        extract.mkdir(parents=True, exist_ok=True)
        with tarfile.open(bundle) as tar:
            kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(extract, **kwargs)
    return bundle


def pack(
    wheels: pathlib.Path,
    menagerie: pathlib.Path | None,
    robots: list[str],
    out_dir: pathlib.Path,
    chunk_mib: float | None,
    extra_last_mib: float,
    repo: pathlib.Path,
) -> dict:
    """Bundle ``wheels/*.whl`` (as ``wheels/``) and the Menagerie ``robots`` (as ``menagerie/<robot>``), split it so
    that each call fits (:data:`CALL_LIMIT` minus the tree, :data:`MARGIN` and, for the last call, ``extra_last_mib``
    of other carried files such as a checkpoint to resume), and return the manifest.

    Raises:
        FileNotFoundError: no wheel in ``wheels``, or a robot folder missing.
        ValueError: the working tree alone leaves no room for a chunk.
    """
    ensure_ignored(repo)
    whls = sorted(wheels.glob("*.whl"))
    if not whls:
        raise FileNotFoundError(f"no .whl in {wheels}: download them first (benchmarks/device/README.md)")
    tree = tree_bytes(repo)
    room = CALL_LIMIT - tree - MARGIN
    chunk = int(chunk_mib * MiB) if chunk_mib else room
    if chunk <= 0 or chunk > room:
        raise ValueError(
            f"the working tree ({tree / MiB:.1f} MiB) leaves {room / MiB:.1f} MiB per call; "
            f"a chunk of {chunk / MiB:.1f} MiB does not fit"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    bundle = out_dir.parent / (out_dir.name + "_bundle.tar.gz")
    with tarfile.open(bundle, "w:gz", compresslevel=6) as tar:
        for w in whls:
            tar.add(w, arcname=f"wheels/{w.name}")
        for r in robots:
            if menagerie is None or not (menagerie / r).is_dir():
                raise FileNotFoundError(f"Menagerie folder {menagerie}/{r} not found (--menagerie)")
            tar.add(menagerie / r, arcname=f"menagerie/{r}")
    manifest = split(bundle, out_dir, chunk)
    if manifest["chunks"][-1]["bytes"] + extra_last_mib * MiB > room:  # the last call also carries the extras
        manifest = split(bundle, out_dir, chunk - int(extra_last_mib * MiB) // len(manifest["chunks"]) - MiB)
    bundle.unlink()
    manifest["wheels"] = [w.name for w in whls]
    manifest["tree_mib"] = round(tree / MiB, 2)
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def plan(manifest: dict, run_args: str, extra_carry: list[str]) -> str:
    """The device calls to make, in order, back to back (each within 30 s of the last one's end)."""
    lines = [
        (
            f"{len(manifest['chunks'])} calls, each within 30 s of the previous one's end (the machine goes back "
            "when idle); total device time about 1 min per staging call plus the last call's timeout_s."
        )
    ]
    last = len(manifest["chunks"]) - 1
    for k, c in enumerate(manifest["chunks"]):
        carry = [f"{STAGE_DIR}/{MANIFEST}", f"{STAGE_DIR}/{c['name']}"] + (extra_carry if k == last else [])
        cmd = "bash benchmarks/device/device.sh " + ("receive" if k < last else f"run {run_args}".strip())
        timeout = 60 if k < last else 600
        lines.append(
            f"call {k + 1}: run(command={cmd!r}, carry={json.dumps(carry)}, timeout_s={timeout})"
            f"  # {c['bytes'] / MiB:.1f} MiB"
        )
    return "\n".join(lines)


def ensure_ignored(repo: pathlib.Path) -> None:
    """Add ``/.devstage/`` to ``.git/info/exclude`` so the chunks travel only where a call carries them."""
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text() if exclude.is_file() else ""
    if f"/{STAGE_DIR}/" not in text.split():
        exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n") + f"/{STAGE_DIR}/\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("pack", help="bundle and split here")
    pk.add_argument("--wheels", type=pathlib.Path, default=pathlib.Path(".whl"))
    pk.add_argument("--menagerie", type=pathlib.Path, default=None)
    pk.add_argument("--robots", nargs="*", default=["unitree_g1"])
    pk.add_argument("--out", type=pathlib.Path, default=pathlib.Path(STAGE_DIR))
    pk.add_argument("--chunk-mib", type=float, default=None, help="default: what fits beside the working tree")
    pk.add_argument("--extra-last-mib", type=float, default=24.0, help="room left in the last call (a checkpoint)")
    pk.add_argument("--run-args", default="", help="arguments for device.sh run, shown in the plan")
    pk.add_argument("--extra-carry", nargs="*", default=[], help="paths the last call also carries")
    rc = sub.add_parser("receive", help="device: check and store the chunks this call carried")
    rc.add_argument("--src", type=pathlib.Path, default=pathlib.Path(STAGE_DIR))
    rc.add_argument("--dest", type=pathlib.Path, default=pathlib.Path("/tmp/upright_stage"))
    jn = sub.add_parser("join", help="here: rebuild a checkpoint the device returned in parts")
    jn.add_argument("--src", type=pathlib.Path, required=True, help="the folder with checkpoint.json and the parts")
    jn.add_argument("--out", type=pathlib.Path, default=pathlib.Path(STAGE_DIR) / "resume")
    jn.add_argument("--index", default="checkpoint.json")
    asm = sub.add_parser("assemble", help="device: join, check, unpack")
    asm.add_argument("--dest", type=pathlib.Path, default=pathlib.Path("/tmp/upright_stage"))
    asm.add_argument("--extract", type=pathlib.Path, default=None)
    a = p.parse_args(argv)
    try:
        if a.cmd == "pack":
            repo = pathlib.Path(__file__).resolve().parents[2]
            m = pack(a.wheels, a.menagerie, a.robots, a.out, a.chunk_mib, a.extra_last_mib, repo)
            print(
                f"bundle {m['bundle_bytes'] / MiB:.1f} MiB ({len(m['wheels'])} wheels) in {len(m['chunks'])} chunks; "
                f"working tree {m['tree_mib']} MiB"
            )
            print(plan(m, a.run_args, a.extra_carry))
        elif a.cmd == "join":
            path = join_parts(a.src, a.index, a.out)
            print(f"rebuilt {path} ({path.stat().st_size / MiB:.1f} MiB), SHA-256 checked; carry {path.parent}")
        elif a.cmd == "receive":
            missing = receive(a.src, a.dest)
            print(f"staged in {a.dest}; missing: {', '.join(missing) or 'none'}")
        else:
            bundle = assemble(a.dest, a.extract)
            print(
                f"assembled {bundle} ({bundle.stat().st_size / MiB:.1f} MiB), SHA-256 checked"
                + (f", unpacked into {a.extract}" if a.extract else "")
            )
    except (FileNotFoundError, ValueError) as e:
        print(f"stage.py {a.cmd}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
