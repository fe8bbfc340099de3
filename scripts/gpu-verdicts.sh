#!/usr/bin/env bash
# The verdict cases that need a real GPU, run and recorded (docs/hardware-validation.md: what was seen).
#
#   OUT=/tmp/gpu-out bash scripts/gpu-verdicts.sh
#
# Set-up as scripts/gpu-check.sh (a registry, or the machine's python3 plus the wheels in .whl/).
# Three real CUDA jobs (scripts/gpu/verdict_jobs.py), each diagnosed with `runbook run --record`:
#   gpu_kernel_spin       a torchrun rank waiting in torch.cuda.synchronize() behind a kernel that
#                         never finishes (training-hang)
#   gpu_oom_other_process a job that fits the empty GPU dies of CUDA OOM beside a stale process
#                         holding most of it (cuda-oom, training-hang, triage)
#   gpu_nccl_duplicate_gpu two NCCL ranks of one torchrun job on one GPU (nccl-errors,
#                         training-hang, triage)
#   gpu_nccl_lone_rank    rank 0 of a two-rank NCCL job alone in the rendezvous (training-hang)
# CASES="1 4" runs only those cases (default: all).
# Everything lands in $OUT/gpu-verdicts.tar.gz (logs, recordings, JSON and text reports); the
# running log is $OUT/gpu-verdicts.log. A step that fails is logged and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-verdicts-out}
mkdir -p "$OUT"
W=/tmp/gpu-verdicts   # short and machine-neutral: the recordings keep these paths
rm -rf "$W"; mkdir -p "$W"/rec "$W"/runs
exec > >(tee -a "$OUT/gpu-verdicts.log") 2>&1
step() { printf '\n== %s %s\n' "$(date +%T)" "$*"; }
wait_for() {  # wait_for FILE PATTERN SECONDS
  for _ in $(seq "$3"); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 1; done
  echo "   '$2' not in $1 after $3 s"; return 1
}

step "machine"
nvidia-smi -L; python3 --version
GPU_PYTHON=$(command -v python3)
if timeout 20 python3 -m pip download --no-deps -q -d /tmp/gpu-verdicts-pip pip >/dev/null 2>&1; then
  make setup && PY=$PWD/.venv/bin/python
else
  echo "no package registry: the machine's Python, plus the wheels in .whl/"
  PY=$GPU_PYTHON
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/rb-site .whl/*.whl
  export PYTHONPATH=/tmp/rb-site PATH="/tmp/rb-site/bin:$PATH"
fi
export PATH="$(dirname "$PY"):$PATH" PYTHONPATH="$PWD/engine${PYTHONPATH:+:$PYTHONPATH}" \
  RUNBOOK_LANG=en PYTHONUNBUFFERED=1
RB=("$PY" -m runbook)
$PY -c "import runbook, torch; print('engine', runbook.__version__, 'torch', torch.__version__, \
'nccl', '.'.join(map(str, torch.cuda.nccl.version())))"
JOBS=$PWD/scripts/gpu/verdict_jobs.py

# diagnose NAME RUNBOOK LOG [--set ...]: one recorded run, its JSON and its text report
diagnose() {
  local name=$1 runbook=$2 logf=$3
  shift 3
  "${RB[@]}" run "$runbook" --set log="$logf" "$@" --record "$W/rec/$name" --format json > "$W/runs/$name.json"
  echo "   [$name] runbook run $runbook: exit $?"
  "${RB[@]}" run "$runbook" --set log="$logf" "$@" > "$W/runs/$name.txt" 2>&1
  $PY scripts/gpu/report_summary.py "$W/runs/$name.json"
}

CASES=${CASES:-1 2 3 4}
wanted() { [[ " $CASES " == *" $1 "* ]]; }

case1() {
step "case 1: a rank behind a GPU kernel that never finishes"
mkdir -p "$W/spin"
setsid torchrun --standalone --nproc-per-node 1 "$JOBS" spin > "$W/spin/train.log" 2>&1 &
SPIN=$!
wait_for "$W/spin/train.log" "entering the next step" 90 && sleep 20
tail -3 "$W/spin/train.log"
nvidia-smi --query-gpu=utilization.gpu,power.draw,memory.used --format=csv | tee "$W/spin/nvidia-smi.csv"
for pid in $(pgrep -f "verdict_jobs.py spin"); do
  echo "-- py-spy dump --native --pid $pid"; timeout 60 py-spy dump --native --pid "$pid"
done > "$W/spin/py-spy.txt" 2>&1
diagnose gpu_kernel_spin training-hang "$W/spin/train.log" --set stall_after=15
# torchrun starts its ranks in sessions of their own: the group's kill leaves them running
kill -9 -- -$SPIN 2>/dev/null; pkill -9 -f "verdict_jobs.py spin"; sleep 2
}

case2() {
step "case 2: an OOM caused by a stale process holding the GPU"
mkdir -p "$W/oom"
setsid "$GPU_PYTHON" "$JOBS" hold --gib 60 > "$W/oom/notebook.log" 2>&1 &
HOLD=$!
wait_for "$W/oom/notebook.log" "idle" 60
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 timeout 120 "$GPU_PYTHON" "$JOBS" train --gib 24 > "$W/oom/train.log" 2>&1
echo "   job exit $?"; tail -4 "$W/oom/train.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$W/oom/apps.csv"
diagnose gpu_oom_other_process cuda-oom "$W/oom/train.log"
diagnose gpu_oom_other_process-training-hang training-hang "$W/oom/train.log"
"${RB[@]}" triage "$W/oom/train.log" > "$W/runs/triage-oom.txt" 2>&1; head -30 "$W/runs/triage-oom.txt"
kill -9 -- -$HOLD 2>/dev/null; sleep 2
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 timeout 120 "$GPU_PYTHON" "$JOBS" train --gib 24 > "$W/oom/alone.log" 2>&1
echo "   the same job on the empty GPU: exit $?"; tail -2 "$W/oom/alone.log"
}

case3() {
step "case 3: two NCCL ranks on one GPU"
mkdir -p "$W/dup"
NCCL_DEBUG=WARN timeout 90 torchrun --standalone --nproc-per-node 2 "$JOBS" same-gpu > "$W/dup/train.log" 2>&1
echo "   job exit $?"; grep -n -m5 -E "WARN|Error" "$W/dup/train.log"
diagnose gpu_nccl_duplicate_gpu nccl-errors "$W/dup/train.log"
diagnose gpu_nccl_duplicate_gpu-training-hang training-hang "$W/dup/train.log"
"${RB[@]}" triage "$W/dup/train.log" > "$W/runs/triage-dup.txt" 2>&1; head -30 "$W/runs/triage-dup.txt"
}

case4() {
step "case 4: a rank alone in the NCCL rendezvous"
mkdir -p "$W/lone"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 setsid "$GPU_PYTHON" "$JOBS" lone-rank \
  > "$W/lone/train.log" 2>&1 &
LONE=$!
wait_for "$W/lone/train.log" "joining the process group" 60 && sleep 20
tail -3 "$W/lone/train.log"
timeout 60 py-spy dump --pid "$LONE" > "$W/lone/py-spy.txt" 2>&1
diagnose gpu_nccl_lone_rank training-hang "$W/lone/train.log" --set stall_after=15
kill -9 -- -$LONE 2>/dev/null; sleep 1
}

for c in 1 2 3 4; do wanted $c && "case$c"; done

step "pack"
tar -czf "$OUT/gpu-verdicts.tar.gz" -C "$(dirname "$W")" "$(basename "$W")"
ls -la "$OUT"
