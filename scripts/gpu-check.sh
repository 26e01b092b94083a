#!/usr/bin/env bash
# Everything that needs a real GPU, in one call (device time is scarce):
#   scripts/gpu-check.sh quick   GPU tests + one headless recording of a PyTorch loop
#   scripts/gpu-check.sh full    also the workload benchmarks (docs/benchmarks.md)
# Results go to $OUT (or ./gpu-check-out). Never changes the card's settings.
set -uo pipefail
mode=${1:-quick}
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
cd "$(dirname "$0")/.."

if [ -d .whl ]; then  # the device has no network: pure-Python deps travel as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 XDG_CONFIG_HOME=/tmp/gputui-xdg

{
  date -u; nvidia-smi --query-gpu=name,driver_version,power.limit,temperature.gpu,clocks.max.sm --format=csv
  python3 -c 'import torch, pynvml, psutil; print("torch", torch.__version__, "nvml-py", pynvml.__version__ if hasattr(pynvml, "__version__") else "?", "psutil", psutil.__version__)'
  nproc; free -g | head -2
} > "$out/machine.txt" 2>&1

python3 -m pytest -m gpu -q -rs tests 2>&1 | tee "$out/pytest-gpu.txt" | tail -15

python3 -m gputui --presets benchmarks/gpu-presets.toml --record "$out/gpu-loop.jsonl" --preset gpu-loop --interval 0.5 \
  2> "$out/gpu-loop.stderr" ; echo "gpu-loop exit $?"
tail -25 "$out/gpu-loop.stderr"

if [ "$mode" = full ] && [ -x benchmarks/run-workloads.sh ]; then
  benchmarks/run-workloads.sh "$out"
fi
