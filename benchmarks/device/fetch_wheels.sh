#!/usr/bin/env bash
# Download benchmarks/device/wheels.txt into a folder (default .whl/, ignored through .git/info/exclude) for the
# lent GPU machine: Python 3.12, x86-64 Linux. mujoco-studio (a dependency of mujoco 4.0 that `import mujoco` does
# not load) is left out to save 12.8 MB per call.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.whl}
mkdir -p "$DEST"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
platforms=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux_2_5_x86_64 manylinux1_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64; do
  platforms="$platforms --platform $p"
done
grep -v '^#' benchmarks/device/wheels.txt | grep -v '^antlr4' | grep . | while read -r req; do
  python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
    -d "$DEST" "$req"
done
python -m pip wheel -q --no-deps -w "$DEST" "$(grep '^antlr4' benchmarks/device/wheels.txt)"
ls -la "$DEST"
du -sh "$DEST"
