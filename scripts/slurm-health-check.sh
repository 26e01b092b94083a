#!/usr/bin/env bash
# gputui's Slurm node health check (issue 24; docs/slurm-health-check.md): run the quick
# check on this node and drain the node when a check fails.  Use it as slurm.conf's
# HealthCheckProgram or as a Prolog:
#
#   HealthCheckProgram=/opt/gputui/slurm-health-check.sh
#   HealthCheckInterval=3600
#   HealthCheckNodeState=IDLE          # only between jobs: the check itself uses the GPUs
# or
#   Prolog=/opt/gputui/slurm-health-check.sh   # before every job (the quick check: under a minute)
#
# A failing verdict drains the node:
#   scontrol update nodename=NODE state=drain reason="gputui: host.shm, gpu.ecc(gpu 3)"
# and the script exits 1.  As HealthCheckProgram slurmd only logs that status.  As a Prolog
# the status is what keeps the job off the bad node: Slurm requeues it (a batch job comes
# back held, "launch failed requeued held": `scontrol release JOBID`), and the node keeps
# the gputui reason (Slurm 22.05 does not replace it with "Prolog error").  Exiting 0
# after draining would let the job run on the node it just drained.
# Resuming is left to a person: the script never resumes a node, and a drained node stays
# drained across slurmd restarts (ReturnToService=2 returns DOWN nodes, not DRAINED ones).
#
# When gputui itself cannot run or its output is not a report (not installed, bad
# arguments, a crash), nothing is drained: the script says why on stderr and exits 2.
#
# Settings (environment):
#   GPUTUI              the gputui command (default: gputui; e.g. "/opt/venv/bin/python -m gputui")
#   GPUTUI_CHECK_ARGS   more `gputui check` arguments (e.g. "--workdir /scratch --gpus 0,1")
#   GPUTUI_HEALTH_DIR   where each run's report goes (default: /var/log/gputui):
#                       latest.json and latest.txt, and fail-TIMESTAMP.json for each failure
#   GPUTUI_PYTHON       a Python 3 that reads the report (default: python3)
#   SLURMD_NODENAME     the node to drain (Slurm sets it for a Prolog; default: hostname -s)
set -euo pipefail

read -r -a gputui <<< "${GPUTUI:-gputui}"
read -r -a check_args <<< "${GPUTUI_CHECK_ARGS:-}"
log_dir=${GPUTUI_HEALTH_DIR:-/var/log/gputui}
python=${GPUTUI_PYTHON:-python3}
node=${SLURMD_NODENAME:-$(hostname -s)}
REASON_MAX=120 # keep sinfo's REASON column readable

# Prints the verdict, then the failed checks on one line ("host.shm, gpu.ecc(gpu 3)").
read_report() {
  "$python" -c '
import json, sys
report = json.load(open(sys.argv[1]))
failed = [c["id"] + ("(gpu %s)" % c["gpu"] if c.get("gpu") is not None else "") for c in report["checks"] if c["status"] == "fail"]
print(report["verdict"]["verdict"])
print(", ".join(dict.fromkeys(failed)))
' "$1"
}

mkdir -p "$log_dir"
# Written aside, then renamed: a Prolog and the health check may overlap.
json=$(mktemp "$log_dir/.check.XXXXXX")
text=$(mktemp "$log_dir/.check.XXXXXX")
trap 'rm -f "$json" "$text"' EXIT

status=0
"${gputui[@]}" check --quick --json --no-history "${check_args[@]}" > "$json" 2> "$text" || status=$?
if ! summary=$(read_report "$json" 2> /dev/null); then
  echo "gputui health check: no report from '${gputui[*]} check' (exit status $status); node $node left as it is:" >&2
  tail -n 20 "$text" >&2
  exit 2
fi
verdict=${summary%%$'\n'*}
failed=${summary#*$'\n'}
cp "$json" "$log_dir/latest.json"
mv -f "$text" "$log_dir/latest.txt"

if [ "$verdict" != fail ]; then
  exit 0
fi
report="$log_dir/fail-$(date -u +%Y%m%dT%H%M%SZ).json"
mv -f "$json" "$report"
reason="gputui: ${failed:-a check failed}"
reason=${reason:0:REASON_MAX}
echo "gputui health check: draining $node ($reason); report: $report" >&2
scontrol update nodename="$node" state=drain reason="$reason"
exit 1
