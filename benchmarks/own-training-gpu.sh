#!/usr/bin/env bash
# The user's own training, on the GPU machine (issue 22): each script of
# benchmarks/own_training/ in its three variants (fed, starved, python-bound), recorded
# headless as a user would run it (`gputui -- python3 SCRIPT ...`), then `--pid` on the
# HF Trainer run started elsewhere, then the table (own_training_table.py).
#   benchmarks/own-training-gpu.sh OUT_DIR [SCRIPT ...]   (default: all four scripts)
# SECONDS_PER_RUN (default 30) is each script's training time; SCRIPT:VARIANT runs one variant.
set -u
out=${1:?usage: own-training-gpu.sh OUT_DIR [SCRIPT ...]}; shift
mkdir -p "$out"
seconds=${SECONDS_PER_RUN:-30}
scripts=("$@"); [ ${#scripts[@]} -gt 0 ] || scripts=(torch_tqdm_loop hf_trainer nanogpt_loop lightning_fit)
for script in "${scripts[@]}"; do
  if [ "$script" = pid ]; then
    # --pid: the job runs on its own; gputui watches its process tree from outside
    for variant in starved python-bound; do
      name="hf_trainer-$variant-pid"
      python3 benchmarks/own_training/hf_trainer.py --variant "$variant" --seconds "$seconds" > "$out/$name.out" 2>&1 & job=$!
      python3 -m gputui --headless --no-history --record "$out/$name.jsonl" --pid "$job" 2> "$out/$name.err"
      echo "$name exit $?"; wait "$job"; tail -n 8 "$out/$name.err"
    done
    continue
  fi
  variants=(fed starved python-bound)
  if [[ $script == *:* ]]; then variants=("${script#*:}"); script=${script%%:*}; fi
  for variant in "${variants[@]}"; do
    name="$script-$variant"
    extra=()
    case $name in  # well fed: models and batches that keep an H200 busy, not the small defaults
      hf_trainer-fed) extra=(--model-size base --batch-size 256 --max-seq-length 256) ;;
      lightning_fit-fed) extra=(--arch resnet50 --batch-size 256) ;;
      nanogpt_loop-fed) extra=(--n-layer 12 --n-head 12 --n-embd 768 --block-size 1024 --batch-size 16) ;;
    esac
    python3 -m gputui --headless --no-history --record "$out/$name.jsonl" \
      -- python3 "benchmarks/own_training/$script.py" --variant "$variant" --seconds "$seconds" "${extra[@]}" > "$out/$name.out" 2> "$out/$name.err"
    echo "$name exit $?"; grep -E "^gputui: (finding|outcome)|throughput median|reported by|phases" "$out/$name.err"
  done
done
python3 benchmarks/own_training_table.py "$out"/*.jsonl | tee "$out/table.md"
python3 benchmarks/own_training_table.py --figures "$out"/*.jsonl | tee "$out/figures.md"
