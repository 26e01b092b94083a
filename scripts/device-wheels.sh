#!/usr/bin/env bash
# .whl/: the Python packages scripts/gpu-check.sh needs that the GPU machine's image lacks,
# as wheels for its Python (3.12, x86_64), since it has no network. Carry ".whl" in each
# device call; gpu-check.sh installs them first.
#
#   scripts/device-wheels.sh              # with python3 of the environment the tests pass in
#   PYTHON=/path/to/venv/bin/python scripts/device-wheels.sh
#
# Each package comes at the version installed here, so the GPU runs the code the tests ran;
# nvitop, the anchor the dashboard's cost is measured against, is no dependency and comes at
# NVITOP_VERSION. PACKAGES is the closure of gputui's dependencies, its frameworks extra, the
# tests and py-spy, less what the image holds (its list: the device tool's KINDS.md), plus
# pytest-xdist and execnet, which it holds at versions of its own; it changes when
# pyproject.toml's dependencies do.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
NVITOP_VERSION=${NVITOP_VERSION:-1.7.2}
PACKAGES=(
  textual tomlkit platformdirs mdit-py-plugins linkify-it-py # the dashboard
  datasets dill multiprocess tzdata                            # the frameworks' scripts
  jsonargparse docstring-parser typeshed-client                # Lightning's CLI example
  pytest-xdist execnet                                         # the frameworks step's workers
  py-spy                                                       # gpu-check's tuiprofile
)

pins=()
for name in "${PACKAGES[@]}"; do
  version=$("$PYTHON" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name" 2> /dev/null) || {
    echo "device-wheels: $name is not installed for $PYTHON (install the test dependencies first, as the README says)" >&2
    exit 2
  }
  pins+=("$name==$version")
done
pins+=("nvitop==$NVITOP_VERSION")

rm -rf .whl
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "${pins[@]}"
du -sh .whl
