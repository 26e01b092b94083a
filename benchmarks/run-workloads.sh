#!/usr/bin/env bash
# Record workload presets headless and summarize them (run by scripts/gpu-check.sh).
#   benchmarks/run-workloads.sh OUT_DIR PRESET [PRESET ...]
# Writes OUT_DIR/PRESET.jsonl and .stderr for each, OUT_DIR/table.md and
# OUT_DIR/diagnosis.txt (findings per recording), and OUT_DIR/recordings.tgz.
set -uo pipefail
out=$1; shift
mkdir -p "$out/rec"
for preset in "$@"; do
  echo "== $preset $(date -u +%T)"
  python3 -m gputui --headless --record "$out/rec/$preset.jsonl" --preset "$preset" --interval 0.5 \
    2> "$out/rec/$preset.stderr"
  echo "   exit $? $(tail -n 12 "$out/rec/$preset.stderr" | grep -E 'throughput median|outcome' | tr -s ' ' | tr '\n' ';')"
done
python3 benchmarks/summarize.py "$out"/rec/*.jsonl > "$out/table.md"
for f in "$out"/rec/*.jsonl; do echo "== $(basename "$f")"; python3 -m gputui.diagnosis "$f"; done > "$out/diagnosis.txt" 2>&1
(cd "$out/rec" && tar czf ../recordings.tgz .) && rm -rf "$out/rec"  # few files may come back
cat "$out/table.md"
