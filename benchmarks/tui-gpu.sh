#!/usr/bin/env bash
# The dashboard against real NVML with a GPU preset running: its CPU and terminal-bytes
# cost at 140x40 and a screenshot at 160x48 (run by scripts/gpu-check.sh tui).
#   gpu-loop: a command printing ~7 output lines a second (the chatty case)
#   torch-resnet50-input-fed: a workload preset, speaking gputui's protocol, long enough that it
#   is still running when the window ends (torch-resnet50 ended inside it, and its summary's
#   first frames were counted as the running state's cost)
set -uo pipefail
out=$1; mkdir -p "$out"
python3 benchmarks/tui_cost.py --preset gpu-loop --presets benchmarks/gpu-presets.toml --seconds 12 --warmup 3 \
  --json "$out/tui-cost-gpu-loop.json" 2>&1 | tail -6
python3 benchmarks/tui_cost.py --preset torch-resnet50-input-fed --seconds 12 --warmup 20 \
  --json "$out/tui-cost-torch-resnet50-input-fed.json" 2>&1 | tail -6  # a run that outlasts the window
# named after the card it ran on (dashboard-h100.svg, dashboard-h200.svg, ...)
card=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | grep -oiE '[a-z][0-9]{2,3}' | head -1 | tr 'A-Z' 'a-z')
python3 -m gputui.tui.screenshot "$out/dashboard-${card:-gpu}.svg" --preset torch-resnet50-input-bound \
  --after 45 --size 160x48 2>&1 | tail -3
