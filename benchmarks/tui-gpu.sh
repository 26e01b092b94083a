#!/usr/bin/env bash
# The dashboard against real NVML with a GPU preset running: its CPU and terminal-bytes
# cost at 140x40 and a screenshot at 160x48 (run by scripts/gpu-check.sh tui).
set -uo pipefail
out=$1; mkdir -p "$out"
python3 benchmarks/tui_cost.py --preset gpu-loop --presets benchmarks/gpu-presets.toml --seconds 12 --warmup 3 \
  --json "$out/tui-cost-h200.json" 2>&1 | tail -15
python3 -m gputui.tui.screenshot "$out/dashboard-h200.svg" --presets benchmarks/gpu-presets.toml --preset gpu-loop \
  --after 15 --size 160x48 2>&1 | tail -5
python3 -m pytest -q -p no:cacheprovider tests/test_tui_app.py tests/test_tui_snapshots.py 2>&1 | tail -3
