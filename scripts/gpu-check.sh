#!/usr/bin/env bash
# Everything that needs a real GPU, in named steps (device time is scarce: group them).
# The packages the GPU machine lacks travel in .whl/: build it first with scripts/device-wheels.sh.
#   scripts/gpu-check.sh tests core twins tuned input maxbatch tui
#     tests     pytest -m gpu
#     core      a headless recording of a PyTorch loop + the telemetry tick cost
#     twins     the PyTorch twins of the seed table (fp32)
#     tuned     the tuned ResNet-50 and BERT-large presets
#     input     the input-bound pair and the synthetic twin, with their findings
#     maxbatch  --find-max-batch for EfficientNet-B7 at 600 px
#     tui       the dashboard headless against real NVML: screenshot and cost
#     tune      gputui tune on a CPU-starved ResNet-50 DataLoader loop written with 2 workers (report, JSON), then
#               a separate tune of the setting it chose against the script as written (~4 min); TUNE_S: trial seconds
#     tunegrid  the same loop by hand over workers TUNE_GRID (default 2,4,8,12,16) (~4 min)
#     tunefed   a fed loop: one trial, not input-bound (~1 min);  tunetaskset: the starved loop on 4 cores (~2 min)
#     frameworks  tests/frameworks on cuda: nanoGPT, timm, Lightning, the Trainer and accelerate's own example scripts
#               under gputui, with and without the probe, one framework per worker (FRAMEWORKS_K picks them,
#               FRAMEWORKS_N the workers; needs pytest-xdist, datasets, dill and multiprocess in .whl/)
#     probecost the probe's cost A/B on the Python-bound loop (PROBE_RUNS pairs, pinned) and the fed ResNet-50 loop
#               (PROBE_FED_RUNS pairs, default 3; 0 skips it)
#     probetoggle the probe's cost inside one run of the Python-bound loop, in blocks of PROBE_TOGGLE_BLOCK s (0.25) with it
#               on and off (PROBE_TOGGLE_RUNS runs of PROBE_TOGGLE_S s; benchmarks/probe_toggle_ab.py), then its per-step cost on this host's CPU
#               (benchmarks/probe_step_cost.py, PROBE_STEP_PAIRS pairs, default 0: 16 take ~3 min more) (~8 min)
#     passthrough a fed GPU loop's own output through `gputui --headless`, to a log and on a terminal (script(1)), and alone
#     checktests  pytest -m gpu for the check's own tests only (quicker than tests)
#     quickcheck  gputui check --quick (under a minute)
#     check     gputui check --price $PRICE (about 5 minutes): Markdown, JSON, recording
#     lookback  record the seed-twin and tuned ResNet-50 presets (for report/compare)
#     metrics   --serve-metrics beside a short GPU run: one scrape at ~15 s in metrics.txt (needs prometheus_client in .whl/)
#     diag      GPM switched off ([diagnosis] use_gpm = false, benchmarks/diag-presets.toml): the
#               input-bound pair, the seed-twin ResNet-50 (bs32) and the tuned one, each
#               recording and its findings (diag/PRESET.jsonl, diag/PRESET.findings.txt); ~5 min
#     faults    pytest -m gpu for the fault tests only (a child out of GPU memory; under a minute)
#     perf      issue 11's figures (about 4 minutes): the sampler table (gputui at 1 s and 0.1 s,
#               nvidia-smi dmon, nvitop's collector from .whl/, an idle pynvml process; all at once,
#               60 s and a 3 s round for the start cost, under a bf16 matmul loop), perturbation and fidelity (A/B/A/B/A/B, 15 s each),
#               and the telemetry tick cost; results in perf/
#     longrun   issue 11's long-run figures on the GPU host's CPU (no GPU used; ~1-2 minutes): the
#               recorder over a fast-forwarded 24 h feed of 8 GPUs and 128 cores (long_run.py), and
#               the dashboard's frame cost and memory over the same (app_scale.py); results in longrun/
#     own       issue 22: the user's own training (benchmarks/own-training-gpu.sh): HF Trainer, a
#               tqdm loop, nanoGPT-style and Lightning scripts, fed / starved / python-bound, recorded
#               headless through `gputui -- ...`, then --pid on the HF Trainer; table in own/table.md.
#               OWN_SCRIPTS picks scripts (default: all; "pid" for the --pid runs) (~2 min a script)
#     owntui    the dashboard on two of those scripts (benchmarks/own-training-presets.toml): screenshots
#     probe     the probe's cost: benchmarks/probe_overhead.py, A/B against the same script without it:
#               the MLP worst case, a fed ResNet-50 DataLoader loop and a Python-bound loop (~6 min)
#     fleet     issue 24: a quick check per GPU (--gpus N) at once, each GPU as a "node", then gputui fleet report
#               over them and the committed H200, H100 and 2xH100 checks (fleet/, about a minute)
#     ddp       DDP ResNet-50 (torchrun, NCCL) with --nproc-per-node 1 on GPU0, and 2 on GPU0,1 when
#               the device has two: each recorded against the 1-GPU tuned run as its baseline, the
#               per-rank and scaling figures in ddp/numbers.txt, and a dashboard screenshot (80x24:
#               a row per GPU with its rank's samples/s) of the largest run; all under ddp/ (~8 min
#               with 2 GPUs). One rank proves the torchrun/NCCL path, not scaling
#     accuracy  issue 23 (~5 min): the check's matmul against a plain torch.mm sweep (benchmarks/matmul_vs_check.py);
#               five healthy quick checks, their spread (benchmarks/check_spread.py) and the baselines they give,
#               written into this copy's baselines.toml; then quick checks beside a planted co-runner taking
#               10 % and 25 % of the GPU (benchmarks/planted_slowdown.py). All under accuracy/
#     matmulbench, repeats, planted  the three parts of accuracy on their own (~3, ~1 and ~1 min)
#     tuicost   issue 25 (~9 min): benchmarks/tui_cost.py --all beside nvitop (from .whl/) at 140x40 and 80x24:
#               idle, a GPU preset running, its summary, findings, the editor, the Check screen; tables,
#               raw streams and breakdowns under tui-cost/ (packed: the device returns few files).
#               TUI_ALL_STATES picks the states (comma-separated; default all), TUI_ALL_SIZES the sizes
#     tuicostlive issue 25 (~4 min): idle and running beside nvitop at 140x40 and 80x24 (tuicost's two states
#               with an nvitop counterpart), then the running preset headless; under tui-cost-live/.
#               TUI_WARMUP and TUI_SECONDS set the warm-up and the window (default 15 and 15), TUI_SIZES the sizes,
#               TUI_STATES the states (default "watching running")
#     tuiprofile issue 25 (~2 min): where the dashboard's CPU goes, idle and running, at 140x40, and the
#               session's alone (headless): py-spy's collapsed stacks over the window (needs py-spy in
#               .whl/), under tui-profile/. TUI_PROFILE_STATES picks the dashboard states (default: both)
#     tuicprofile issue 25 (~3 min): cProfile inside gputui over the window (tui_cost.py --cprofile), the dashboard
#               over a running preset at 140x40, then the same run headless; calls and times by function under tui-cprofile/.
#               TUI_PROFILER=--thread-times: each main function's CPU by thread instead (exact, where 3.12's cProfile mixes threads);
#               TUI_PROFILE_SIZE the terminal size (default 140x40)
#     xidcost   issue 25 (~1 min): the CPU of XID watchers, one, two in one process, and one beside another
#               process's (benchmarks/xid_watch_cost.py), in xid-watch-cost.txt
#     reattach  issue 41 (~7 min): benchmarks/reattach.py: reattach-input-fed started in the dashboard for
#               REATTACH_S (default 180) s, the dashboard SIGKILLed at 60 s, attached again at 90 s; the recording's
#               gaps, and its figure against the same run headless; screens and tables under reattach/
#     viewercost issue 41 (~5 min): benchmarks/viewer_cost.py: the dashboard attached to a detached reattach-input-fed
#               run, beside nvitop (from .whl/), and nvitop alone, at TUI_ALL_SIZES (default 140x40,80x24) after
#               TUI_WARMUP (60) s of the run, TUI_SECONDS (30) s windows; the run's own CPU too; under viewer-cost/
#     tuicost2  issue 25 on a machine with 2+ GPUs (~3 min): idle and a DDP run on every GPU
#               (benchmarks/gpu-presets.toml tui-ddp) at 140x40, beside nvitop; under tui-cost-2gpu/.
#               TUI_WARMUP and TUI_SECONDS set the DDP run's warm-up and window (default 40 and 15); TUI_NO_IDLE=1 skips idle
#     cotenant  issue 28 (~5 min): the tuned ResNet-50 preset while a second, separate process (not gputui's
#               child) holds 20 GiB and runs a bf16 matmul loop: recording, co_tenant finding, the
#               process list and an 80x24 dashboard screenshot; then the same run alone: no finding.
#               All under cotenant/ (~6 min)
# Everything is written to a temporary folder and packed into $OUT/results.tgz (few files come back);
# a second run in the same call packs into results-2.tgz and so on, and adds to log.txt.
# Results go to $OUT (or ./gpu-check-out). Never changes the card's settings.
set -uo pipefail
final=${OUT:-$PWD/gpu-check-out}
out=$(mktemp -d /tmp/gpu-check.XXXX)  # everything goes here, and comes back packed in one file
mkdir -p "$final"
# The log also goes straight to $OUT, so a step cut by the device's time limit still
# leaves what it printed (the packed results only exist once every step has finished).
exec > >(tee -a "$final/log.txt") 2>&1
cd "$(dirname "$0")/.."

if [ -d .whl ]; then  # the device has no network: pure-Python deps travel as wheels
  # By name from the folder: pip takes each one's wheel for this Python (some have one per version).
  wheels=$(for w in .whl/*.whl; do basename "$w" | cut -d- -f1; done | sort -u)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --find-links .whl $wheels || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH  # bin: py-spy, for tuiprofile
fi
export PYTHONUNBUFFERED=1 XDG_CONFIG_HOME=/tmp/gputui-xdg GPUTUI_CACHE_DIR=/tmp/gputui-cache
# A pip install compiles the bytecode; this carried tree and the --no-compile wheels have
# none, and compiling gputui and Textual at every start (over 1 s of CPU) is not what a
# user's run pays: it made the first frame 1.67 s on a fresh device (2026-11-25)
python3 -m compileall -q gputui ${PYTHONPATH:+/tmp/site} > /dev/null

{
  date -u; nvidia-smi --query-gpu=name,driver_version,power.limit,temperature.gpu,clocks.max.sm --format=csv
  python3 -c 'import torch, torchvision, transformers, psutil; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__, "psutil", psutil.__version__)'
  nproc; free -g | head -2
} > "$out/machine.txt" 2>&1

# benchmarks/SCRIPT ARGS... while a bf16 matmul loop keeps the GPU busy; the loop is
# stopped by pid: a bare `wait` would also wait for the log's tee (bash 5.1+ waits for
# process substitutions), which never ends.
loaded() {
  python3 benchmarks/gpu_loop.py 4000 > /dev/null & local loop=$!
  sleep 5; python3 "benchmarks/$1" "${@:2}"; local rc=$?
  kill "$loop" 2> /dev/null; wait "$loop" 2> /dev/null; return $rc
}

# Issue 23's steps. quick NAME: a quick check, its JSON, Markdown, recording and how long it took
quick() {
  local d="$out/accuracy" began=$SECONDS
  mkdir -p "$d"
  python3 -m gputui check --quick --no-history --json --markdown "$d/$1.md" --record "$d/$1.jsonl" > "$d/$1.json" 2> "$d/$1.log"
  echo "$1: exit $? in $((SECONDS - began)) s; $(grep -o "verdict: [^*]*" "$d/$1.md" | head -1)"
  grep -E 'matmul|Against the other|Other processes|memory bandwidth' "$d/$1.log" | cut -c1-330
}
# five healthy quick checks, their spread, and the baselines they give, written into this copy's baselines.toml
repeats() {
  local d="$out/accuracy" i model
  for i in 1 2 3 4 5; do quick "healthy-$i"; done
  model=$(python3 -c 'import json, sys; from gputui.gpus.models import find_model
g = json.load(open(sys.argv[1]))["header"]["gpus"][0]; print(find_model(g["name"], g["memory_total"]).model)' "$d/healthy-1.json")
  python3 benchmarks/check_spread.py "$d"/healthy-*.json --baselines-for "$model" --apply-to gputui/gpus/data/baselines.toml > "$d/spread.md"
  grep -E 'runs;|matmul|memory_bandwidth|h2d|d2h|^model' "$d/spread.md"
}
# quick checks beside a co-runner taking 10 % and 25 % of the GPU
planted() {
  local d="$out/accuracy" duty co
  for duty in 0.10 0.25; do
    python3 benchmarks/planted_slowdown.py --duty "$duty" > "$d/planted-$duty.co.log" 2>&1 & co=$!
    sleep 10; head -1 "$d/planted-$duty.co.log"
    quick "planted-$duty"
    kill "$co" 2> /dev/null; wait "$co" 2> /dev/null; tail -1 "$d/planted-$duty.co.log"
  done
}

for step in "$@"; do
  echo "##### $step $(date -u +%T)"
  case $step in
    ddp)
      d="$out/ddp"; mkdir -p "$d"
      gpus=$(nvidia-smi -L | wc -l)
      nprocs="1"; [ "$gpus" -ge 2 ] && nprocs="1 2"
      echo "GPUs on this device: $gpus; DDP runs with --nproc-per-node: $nprocs$([ "$gpus" -lt 2 ] && echo ' (one GPU: this proves the torchrun/NCCL path, not scaling)')" | tee "$d/gpus.txt"
      # torch-resnet50-tuned-ddp pinned to its first N GPUs: data_parallel = N is torchrun's
      # --nproc-per-node=N, gpus = [...] its CUDA_VISIBLE_DEVICES (rank r drives the r-th one)
      for n in $nprocs; do
        pinned=$(seq -s, 0 $((n - 1)))
        sed -n '/^\[presets.torch-resnet50-tuned-ddp\]/,/^data_parallel/p' presets.toml \
          | sed -e "s/^\[presets.torch-resnet50-tuned-ddp\]/[presets.ddp-nproc$n]/" -e "s/^data_parallel = .*/data_parallel = $n\ngpus = [$pinned]/" -e "s/DDP on every GPU/DDP on GPUs $pinned/"
        echo
      done > "$d/presets.toml"
      cat "$d/presets.toml"
      # NVLink multicast (NVLS) stays off on the lent machines; NCCL_DEBUG=INFO shows NCCL's init in the recording
      export NCCL_NVLS_ENABLE=0
      python3 -m gputui --headless --no-history --record "$d/baseline.jsonl" --preset torch-resnet50-tuned --duration 300 \
        2> "$d/baseline.stderr"; echo "1-GPU baseline exit $?"; tail -8 "$d/baseline.stderr"
      for n in $nprocs; do
        NCCL_DEBUG=INFO python3 -m gputui --headless --no-history --presets "$d/presets.toml" --record "$d/ddp-nproc$n.jsonl" \
          --preset "ddp-nproc$n" --baseline "$d/baseline.jsonl" --duration 300 2> "$d/ddp-nproc$n.stderr"
        echo "ddp --nproc-per-node $n exit $?"; tail -20 "$d/ddp-nproc$n.stderr"
        echo "NCCL INFO lines in the recording: $(grep -c 'NCCL INFO' "$d/ddp-nproc$n.jsonl")"
      done
      python3 - "$d"/baseline.jsonl "$d"/ddp-nproc*.jsonl > "$d/numbers.txt" <<'PY'
import sys
from pathlib import Path
from gputui.record.recording import read_recording
for path in map(Path, sys.argv[1:]):
    summary = read_recording(path).summary
    tp = summary.throughput if summary is not None else None
    if tp is None:
        print(f"{path.name}: no summary"); continue
    ranks = ", ".join(f"rank {r.rank} {r.median}" for r in tp.ranks or [])
    print(f"{path.name}: median {tp.median} samples/s, world {tp.world_size}; {ranks or 'no ranks'}; scaling {tp.scaling}")
PY
      cat "$d/numbers.txt"
      # The dashboard on the largest run, headless: 80x24 shows a row per GPU with its rank's samples/s
      # (torch.compile takes about a minute per rank before the first reading)
      n=${nprocs##* }
      python3 -m gputui.tui.screenshot "$d/dashboard-ddp-nproc$n.svg" --presets "$d/presets.toml" --preset "ddp-nproc$n" \
        --baseline "$d/baseline.jsonl" --after 150 --size 80x24 2>&1 | tail -3
      cat "$d/dashboard-ddp-nproc$n.txt"
      unset NCCL_NVLS_ENABLE ;;
    cotenant)
      d="$out/cotenant"; mkdir -p "$d"
      hog() {  # a co-tenant: 20 GiB held and a matmul loop, started from this shell (gputui's sibling)
        python3 -c 'import torch, time
held = torch.empty(20 * 1024**3, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("hog holds", held.numel() >> 30, "GiB", flush=True)
while True:
    a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()' > "$d/hog.log" 2>&1 &
        echo $!
      }
      hog_pid=$(hog); sleep 15; echo "hog pid $hog_pid"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv | tee "$d/nvidia-smi-apps.txt"
      python3 -m gputui --headless --no-history --record "$d/shared.jsonl" --preset torch-resnet50-tuned --duration 100 \
        2> "$d/shared.stderr"; echo "shared run exit $?"; tail -12 "$d/shared.stderr"
      python3 -m gputui.tui.screenshot "$d/dashboard-shared.svg" --preset torch-resnet50-tuned --after 70 --size 80x24 2>&1 | tail -3
      cat "$d/dashboard-shared.txt"
      kill "$hog_pid" 2> /dev/null; wait "$hog_pid" 2> /dev/null; sleep 5
      python3 -m gputui --headless --no-history --record "$d/alone.jsonl" --preset torch-resnet50-tuned --duration 100 \
        2> "$d/alone.stderr"; echo "alone run exit $?"
      python3 - "$d/shared.jsonl" "$d/alone.jsonl" > "$d/findings.txt" <<'PY'
import sys
from pathlib import Path
from gputui.record.recording import read_recording
for path in map(Path, sys.argv[1:]):
    rec = read_recording(path)
    last = next((s.gpus[0].processes for s in reversed(rec.samples) if s.gpus and s.gpus[0].processes is not None), None)
    print(f"== {path.name}: summary gpus {[(g.others_max, g.others_seconds, g.others_peak_memory) for g in (rec.summary.gpus if rec.summary else [])]}")
    print("   last process list:", [(p.pid, p.owner, p.user, p.command, p.used_memory, p.sm_util) for p in last or ()])
    found = [e.payload for e in rec.events if e.kind == "finding" and e.payload.kind == "co_tenant"]
    print(f"   co_tenant findings: {len(found)}")
    for f in found[-1:]:
        print("   ", f.severity, f.title); print("   ", f.evidence)
PY
      cat "$d/findings.txt" ;;
    matmulbench) mkdir -p "$out/accuracy"; python3 benchmarks/matmul_vs_check.py --gpu 0 --out "$out/accuracy" 2>&1 | tail -12 ;;
    repeats) repeats ;;
    planted) planted ;;
    accuracy) mkdir -p "$out/accuracy"; python3 benchmarks/matmul_vs_check.py --gpu 0 --out "$out/accuracy" 2>&1 | tail -12
              repeats; planted ;;
    tuicost) python3 benchmarks/tui_cost.py --all --sizes "${TUI_ALL_SIZES:-140x40,80x24}" --states "${TUI_ALL_STATES:-watching,running,summary,findings,editor,check}" --preset torch-resnet50 \
               --running-preset torch-resnet50-input-fed --findings-preset torch-resnet50-input-bound \
               --nvitop --warmup 15 --seconds 15 --out "$out/tui-cost" 2>&1 | tail -30 ;;
    tuicostlive) for size in ${TUI_SIZES:-140x40 80x24}; do  # the two states beside nvitop, at both sizes (~4 min)
                   for state in ${TUI_STATES:-watching running}; do
                     python3 benchmarks/tui_cost.py --state $state --size $size --preset torch-resnet50 \
                       --presets benchmarks/gpu-presets.toml --running-preset tui-input-fed --nvitop --warmup ${TUI_WARMUP:-15} --seconds ${TUI_SECONDS:-15} \
                       --out "$out/tui-cost-live/$state-$size" 2>&1 | tail -3
                   done
                 done
                 # the same run recorded headless: what the session costs without the dashboard
                 python3 benchmarks/tui_cost.py --state running --headless --presets benchmarks/gpu-presets.toml --preset tui-input-fed \
                   --warmup ${TUI_WARMUP:-15} --seconds ${TUI_SECONDS:-15} --out "$out/tui-cost-live/headless" 2>&1 | grep -E "cpu_percent|bytes_per_s:" ;;
    reattach) python3 benchmarks/reattach.py --presets benchmarks/gpu-presets.toml --preset reattach-input-fed \
                --duration ${REATTACH_S:-180} --kill-at 60 --attach-at 90 --out "$out/reattach" 2>&1 | tail -14 ;;
    viewercost) python3 benchmarks/viewer_cost.py --presets benchmarks/gpu-presets.toml --preset reattach-input-fed \
                  --warmup ${TUI_WARMUP:-60} --seconds ${TUI_SECONDS:-30} --sizes "${TUI_ALL_SIZES:-140x40,80x24}" --out "$out/viewer-cost" 2>&1 | tail -20 ;;
    tuiprofile) for state in ${TUI_PROFILE_STATES:-watching running}; do
                  python3 benchmarks/tui_cost.py --state $state --preset torch-resnet50 --running-preset torch-resnet50-input-fed \
                    --warmup 15 --seconds 30 --profile --out "$out/tui-profile" 2>&1 | grep -E "cpu_percent|bytes_per_s:|py-spy"
                done
                # the same run recorded headless: what the session costs without the dashboard, and where
                python3 benchmarks/tui_cost.py --state running --headless --preset torch-resnet50-input-fed \
                  --warmup 15 --seconds 30 --profile --out "$out/tui-profile/headless" 2>&1 | grep -E "cpu_percent|bytes_per_s:" ;;
    tuicprofile) for face in "" --headless; do  # where the CPU goes, by function: cProfile over the window (~3 min)
                   python3 benchmarks/tui_cost.py --state running $face --presets benchmarks/gpu-presets.toml --preset tui-input-fed \
                     --size ${TUI_PROFILE_SIZE:-140x40} --warmup ${TUI_WARMUP:-40} --seconds ${TUI_SECONDS:-30} ${TUI_PROFILER:---cprofile} --out "$out/tui-cprofile${face:+/headless}" 2>&1 | tail -2
                 done ;;
    xidcost) python3 benchmarks/xid_watch_cost.py --seconds 5 2>&1 | tee "$out/xid-watch-cost.txt" ;;
    tuicost2) mkdir -p "$out/tui-cost-2gpu"
              [ -n "${TUI_NO_IDLE:-}" ] || python3 benchmarks/tui_cost.py --state watching --preset watch --nvitop --warmup 10 --seconds 15 \
                 --out "$out/tui-cost-2gpu/idle" 2>&1 | tail -8
              python3 benchmarks/tui_cost.py --state running --preset tui-ddp --presets benchmarks/gpu-presets.toml --nvitop \
                 --warmup ${TUI_WARMUP:-40} --seconds ${TUI_SECONDS:-15} --out "$out/tui-cost-2gpu/ddp" 2>&1 | tail -8 ;;
    tests) GPUTUI_SCREENSHOT_DIR="$out" python3 -m pytest -m gpu -q -rs tests 2>&1 | tee "$out/pytest-gpu.txt" | tail -25 ;;
    core)
      python3 -m gputui --presets benchmarks/gpu-presets.toml --record "$out/gpu-loop.jsonl" --preset gpu-loop \
        --interval 0.5 2> "$out/gpu-loop.stderr"; echo "gpu-loop exit $?"; tail -12 "$out/gpu-loop.stderr"
      loaded sample_cost.py --ticks 300 | tee "$out/sample-cost.txt"
      # a trainer's tree: a main process and 12 data-loader workers, 40 threads each
      loaded sample_cost.py --ticks 300 --tree 13 --threads 40 | tail -n +2 | tee -a "$out/sample-cost.txt"
      # the same with its main busy (its threads are read: THREADS_EVERY_S), at the sampler's pace
      loaded sample_cost.py --ticks 30 --tick-s 1.0 --tree 13 --threads 40 --busy-main | tail -n +2 | tee -a "$out/sample-cost.txt" ;;
    twins) benchmarks/run-workloads.sh "$out/twins" torch-resnet50 torch-mobilenetv2 torch-distilbert torch-bert-large \
             torch-efficientnet-b0 torch-efficientnet-b3 torch-efficientnet-b7 ;;
    tuned) benchmarks/run-workloads.sh "$out/tuned" torch-resnet50-tuned torch-bert-large-tuned ;;
    input) benchmarks/run-workloads.sh "$out/input" torch-resnet50-input-bound torch-resnet50-input-fed torch-resnet50
           cat "$out/input/diagnosis.txt" ;;
    maxbatch) benchmarks/run-workloads.sh "$out/maxbatch" torch-efficientnet-b7-max-batch ;;
    own) benchmarks/own-training-gpu.sh "$out/own" ${OWN_SCRIPTS:-} ;;
    owntui) mkdir -p "$out/own"
            for preset in ${OWNTUI_PRESETS:-own-hf-trainer-starved own-torch-tqdm-python-bound}; do
              python3 -m gputui.tui.screenshot "$out/own/dashboard-$preset.svg" --presets benchmarks/own-training-presets.toml \
                --preset "$preset" --after 45 --size 140x40; echo "$preset screenshot exit $?"
            done ;;
    probe) mkdir -p "$out/probe"  # the worst case (a small MLP: the probe's per-step cost is a large share), then a real loop
           python3 benchmarks/probe_overhead.py --runs 5 --seconds 15 2>&1 | tee "$out/probe/mlp.txt" | tail -6
           python3 benchmarks/probe_overhead.py --runs 3 --pattern 'throughput: ([0-9.]+)' \
             -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant fed --seconds 25 2>&1 | tee "$out/probe/resnet50.txt" | tail -6
           python3 benchmarks/probe_overhead.py --runs 3 --pattern 'throughput: ([0-9.]+)' \
             -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant python-bound --seconds 25 2>&1 | tee "$out/probe/python-bound.txt" | tail -6 ;;
    probecost) mkdir -p "$final/probe"  # the probe's cost, A/B back to back, on the two loops it must cost <= 1 % (~8 min)
           # The Python-bound loop pinned to two cores: its rate is its one thread's speed, which moves with the core it
           # lands on; both arms are pinned alike. Written straight to $OUT, so a call cut short keeps what ran.
           python3 benchmarks/probe_overhead.py --runs "${PROBE_RUNS:-5}" --pattern 'throughput: ([0-9.]+)' \
             -- taskset -c 2,3 python3 benchmarks/own_training/torch_tqdm_loop.py --variant python-bound --seconds "${PROBE_S:-20}" \
             2>&1 | tee "$final/probe/python-bound.txt" | tail -7
           [ "${PROBE_FED_RUNS:-3}" -gt 0 ] && python3 benchmarks/probe_overhead.py --runs "${PROBE_FED_RUNS:-3}" \
             --pattern 'throughput: ([0-9.]+)' \
             -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant fed --seconds "${PROBE_S:-20}" \
             2>&1 | tee "$final/probe/resnet50.txt" | tail -7 ;;
    probetoggle) mkdir -p "$final/probe"  # the probe's cost inside one run of the Python-bound loop (~8 min): blocks of steps with
           # it on and off, alternating (benchmarks/probe_toggle_ab.py), pinned as probecost's; then its per-step cost on this
           # host's CPU (benchmarks/probe_step_cost.py, one core). Straight to $OUT, so a call cut short keeps what ran.
           taskset -c 2,3 python3 benchmarks/probe_toggle_ab.py --runs "${PROBE_TOGGLE_RUNS:-3}" --block "${PROBE_TOGGLE_BLOCK:-0.25}" --warmup 20 --save "$final/probe/toggle" \
             -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant python-bound --seconds "${PROBE_TOGGLE_S:-140}" \
             2>&1 | tee "$final/probe/python-bound-toggle.txt" | tail -10
           [ "${PROBE_STEP_PAIRS:-0}" -gt 0 ] && python3 benchmarks/probe_step_cost.py --pairs "${PROBE_STEP_PAIRS}" --core 5 \
             2>&1 | tee "$final/probe/step-cost.txt" | tail -8 ;;
    passthrough) mkdir -p "$out/passthrough"  # a GPU loop's own output through gputui: to a log, and on a terminal (script(1))
           loop="python3 benchmarks/own_training/torch_tqdm_loop.py --variant fed --seconds 20"
           python3 -m gputui --headless --record "$out/passthrough/log.jsonl" -- $loop \
             > "$out/passthrough/stdout.txt" 2> "$out/passthrough/stderr.txt"; echo "to a log: exit $?"
           $loop > "$out/passthrough/alone.txt" 2>&1; echo "alone: exit $?"
           COLUMNS=120 LINES=30 script -qfec "python3 -m gputui --headless --record $out/passthrough/terminal.jsonl -- $loop" \
             "$out/passthrough/terminal.typescript" > /dev/null; echo "on a terminal: exit $?"
           tail -5 "$out/passthrough/stdout.txt"; tail -12 "$out/passthrough/stderr.txt" ;;
    frameworks) mkdir -p "$out/frameworks" "$final/frameworks"  # the frameworks' own example scripts (tests/data/frameworks) on cuda
           # One framework per pytest-xdist worker (--dist loadscope: a module's runs stay together), so that the five
           # fit one call; each run's figure and the script's own are read from the same run, so a shared GPU hits both.
           # The report goes straight to $OUT: a step cut by the call's limit still leaves the runs that ended.
           FRAMEWORKS_DEVICE=cuda FRAMEWORKS_REPORT="$final/frameworks/report.jsonl" FRAMEWORKS_KEEP="$out/frameworks/keep" \
             timeout "${FRAMEWORKS_TIMEOUT_S:-540}" python3 -m pytest tests/frameworks -q -rA -p no:cacheprovider \
             -n "${FRAMEWORKS_N:-5}" --dist loadscope -k "${FRAMEWORKS_K:-nanogpt or timm or lightning or trainer or accelerate}" 2>&1 \
             | tee "$final/frameworks/pytest.txt" | grep -E "passed|failed|PASSED|FAILED|SKIPPED|XPASS|XFAIL" | tail -60 ;;
    tune) mkdir -p "$out/tune"  # gputui tune on a CPU-starved DataLoader loop written with 2 workers, then a separate run of its choice
          loop="python3 benchmarks/own_training/torch_tqdm_loop.py --variant starved --workers 2 --seconds 3600"
          python3 -m gputui tune --trial-seconds "${TUNE_S:-30}" --json --report "$out/tune/auto.html" -- $loop \
            > "$out/tune/auto.json" 2> "$out/tune/auto.txt"; echo "auto tune exit $? in $SECONDS s"; cat "$out/tune/auto.txt"
          chosen=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); c = d["chosen"]
print(d["trials"][c - 1]["settings"]["num_workers"] if c else "")' "$out/tune/auto.json")
          echo "chosen workers: ${chosen:-none}"
          if [ -n "$chosen" ]; then
            python3 -m gputui tune --trial-seconds "${TUNE_S:-30}" --workers "$chosen" --json -- $loop \
              > "$out/tune/separate.json" 2> "$out/tune/separate.txt"; echo "separate run exit $?"; cat "$out/tune/separate.txt"
          fi
          python3 - "$out/tune" <<'PY'
import json, sys
d = sys.argv[1]
auto = json.load(open(f"{d}/auto.json"))
print("auto:", auto["verdict"], auto["headline"], auto["change"], auto["gain"])
try:
    sep = json.load(open(f"{d}/separate.json"))
except OSError:
    sys.exit(0)
g = auto["gain"]
trial = sep["trials"][1] if len(sep["trials"]) > 1 else None
if g and trial and trial["gain"]:
    t = trial["gain"]
    inside = t["low"] is not None and t["low"] <= g["ratio"] <= t["high"]
    print(f"stated gain {g['ratio']:.3f}; the separate run's gain {t['ratio']:.3f} ({t['low']:.3f} to {t['high']:.3f}): {'inside' if inside else 'OUTSIDE'}")
PY
          ;;
    tunegrid) mkdir -p "$out/tune"  # the same loop by hand over the grid: every worker count, each a trial
          python3 -m gputui tune --trial-seconds "${TUNE_S:-30}" --workers "${TUNE_GRID:-2,4,8,12,16}" --json \
            -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant starved --workers 2 --seconds 3600 \
            > "$out/tune/grid.json" 2> "$out/tune/grid.txt"; echo "by-hand grid exit $?"; cat "$out/tune/grid.txt" ;;
    tunefed) mkdir -p "$out/tune"  # a fed loop: one trial, not input-bound
          python3 -m gputui tune --trial-seconds "${TUNE_S:-30}" -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant fed --seconds 3600 \
            > "$out/tune/fed.txt" 2>&1; echo "fed tune exit $?"; cat "$out/tune/fed.txt" ;;
    tunetaskset) mkdir -p "$out/tune"  # the starved loop on 4 cores: the CPU cannot feed the GPU
          taskset -c 0-3 python3 -m gputui tune --trial-seconds "${TUNE_S:-30}" \
            -- python3 benchmarks/own_training/torch_tqdm_loop.py --variant starved --workers 2 --seconds 3600 \
            > "$out/tune/taskset.txt" 2>&1; echo "taskset tune exit $?"; cat "$out/tune/taskset.txt" ;;
    tui) if [ -x benchmarks/tui-gpu.sh ]; then benchmarks/tui-gpu.sh "$out/tui"; else echo "no benchmarks/tui-gpu.sh"; fi ;;
    faults) python3 -m pytest -m gpu -q -rs tests/reliability/test_faults_*.py 2>&1 | tee "$out/pytest-gpu-faults.txt" | tail -25 ;;
    checktests) python3 -m pytest -m gpu -q -rs tests/check/test_check_*.py 2>&1 | tee "$out/pytest-gpu-check.txt" | tail -25 ;;
    quickcheck) python3 -m gputui check --quick --price "${PRICE:-3.0}" --record "$out/quickcheck.jsonl" \
                  --markdown "$out/quickcheck.md" --json > "$out/quickcheck.json" 2> "$out/quickcheck.log"
                echo "quick check exit $?"; cat "$out/quickcheck.log" ;;
    check) python3 -m gputui check --price "${PRICE:-3.0}" --record "$out/check.jsonl" --markdown "$out/check.md" \
             --json > "$out/check.json" 2> "$out/check.log"
           echo "check exit $?"; cat "$out/check.log" ;;
    lookback) for preset in torch-resnet50 torch-resnet50-tuned; do
                python3 -m gputui --headless --record "$out/$preset.jsonl" --preset "$preset" --interval 0.5 \
                  2> "$out/$preset.stderr"; echo "$preset exit $?"; tail -n 14 "$out/$preset.stderr"
              done ;;
    metrics) port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
             python3 -m gputui --headless --presets benchmarks/gpu-presets.toml --preset gpu-loop --duration 25 \
               --interval 0.5 --price "${PRICE:-3.0}" --record "$out/metrics-run.jsonl" --serve-metrics "127.0.0.1:$port" \
               2> "$out/metrics-run.stderr" &
             gputui_pid=$!; sleep 15
             python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
               "http://127.0.0.1:$port/metrics" > "$out/metrics.txt"; echo "scrape exit $?"
             wait "$gputui_pid"; echo "gputui exit $?"; tail -4 "$out/metrics-run.stderr"
             grep -E '^(DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_DEV_POWER_USAGE|gputui_throughput|gputui_cost)' "$out/metrics.txt" ;;
    diag) mkdir -p "$out/diag"
          for preset in torch-resnet50-input-bound torch-resnet50-input-fed torch-resnet50 torch-resnet50-tuned; do
            python3 -m gputui --presets benchmarks/diag-presets.toml --headless --record "$out/diag/$preset.jsonl" \
              --preset "$preset" --interval 0.5 2> "$out/diag/$preset.stderr"
            echo "$preset exit $? $(grep -E 'throughput median|outcome' "$out/diag/$preset.stderr" | tr -s ' ' | tr '\n' ';')"
            python3 - "$out/diag/$preset.jsonl" <<'PY'
import json, sys
header = json.loads(open(sys.argv[1]).readline())
print("   gpm_supported:", [g.get("gpm_supported") for g in header.get("gpus") or []],
      "use_gpm:", (header.get("diagnosis") or {}).get("use_gpm"))
PY
            python3 -m gputui.diagnosis "$out/diag/$preset.jsonl" > "$out/diag/$preset.findings.txt" 2>&1
            sed 's/^/   /' "$out/diag/$preset.findings.txt"
          done ;;
    perf) mkdir -p "$out/perf"
          python3 benchmarks/sampler_table.py --seconds 60 --start-seconds 3 --load --out "$out/perf"; echo "sampler table exit $?"
          python3 benchmarks/perturb.py --rounds 3 --seconds 15 --warmup 3 --interval 0.1 --out "$out/perf"
          echo "perturb exit $?"
          loaded sample_cost.py --ticks 300 | tee "$out/perf/sample-cost.txt" ;;
    longrun) mkdir -p "$out/longrun"; lscpu | grep -E 'Model name|^CPU\(s\)' > "$out/longrun/cpu.txt"; uptime >> "$out/longrun/cpu.txt"
             python3 benchmarks/long_run.py --hours 24 --gpus 8 --cores 128 --out "$out/longrun"; echo "long_run exit $?"
             python3 benchmarks/app_scale.py --hours 24 --gpus 8 --cores 128 --frames 200 --out "$out/longrun"; echo "app_scale exit $?" ;;
    fleet) mkdir -p "$out/fleet"  # issue 24: each GPU of this machine checked as a node, beside the committed checks
           pids=()
           for g in $(nvidia-smi --query-gpu=index --format=csv,noheader); do
             node="$(hostname -s)-gpu$g"
             python3 -m gputui check --quick --gpus "$g" --json --no-history --record "$out/fleet/$node.jsonl" \
               > "$out/fleet/$node.json" 2> "$out/fleet/$node.stderr" & pids+=($!)
           done
           for pid in "${pids[@]}"; do wait "$pid"; echo "check exit $?"; done  # by pid: see loaded()
           # the committed checks predate the matmul sweep (issue 23): this machine's nodes are compared among themselves
           python3 -m gputui fleet report "$out"/fleet/*.json --price "${PRICE:-3.0}" --out "$out/fleet/report" | tee "$out/fleet/report.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
# A run gputui started detached (a session of its own) would outlive this call and load the
# next one: every step stops its own, and anything left is stopped here.
pkill -TERM -f "gputui[.]live" 2> /dev/null && { sleep 8; pkill -KILL -f "gputui[.]live" 2> /dev/null; echo "stopped detached runs left behind"; }
archive="$final/results.tgz"  # not over an earlier run's in the same call
n=2
while [ -e "$archive" ]; do archive="$final/results-$n.tgz"; n=$((n + 1)); done
(cd "$out" && tar czf "$archive" .) && echo "results: $archive ($(du -h "$archive" | cut -f1))"
