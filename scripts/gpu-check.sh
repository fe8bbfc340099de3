#!/usr/bin/env bash
# The GPU checks on a real NVIDIA GPU, in one run (docs/hardware-validation.md: what was seen).
#
#   OUT=/tmp/gpu-out bash scripts/gpu-check.sh
#
# Set-up as the README's `make setup` where a package registry answers. A GPU machine with no
# network uses its own python3 (its CUDA torch and nvidia-ml-py) in a venv that sees them, plus
# the wheels of the engine's other dependencies carried in .whl/, made here beforehand with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     -d .whl jsonschema jsonschema-specifications referencing rpds-py ruamel.yaml py-spy
#   pip wheel --no-deps -w .whl python-hostlist
# (the machine's Python version; .whl/ is git-ignored). Then, in order:
#   pytest -m gpu; the check tests against the real driver;
#   raw answers of nvidia-smi (the check's own queries, -q) and NVML (scripts/gpu/nvml_record.py)
#   for the fixtures in tests/checks/data/gpu-h100/;
#   `runbook check` for each GPU check type (--format json), beside a real CUDA job;
#   `runbook run gpu-hardware` and `training-hang` against that job, `cuda-oom` and
#   `training-hang` against a real CUDA out-of-memory error; `runbook collect` on the job;
#   a one-rank NCCL flight-recorder trace (scripts/gpu/fr_dump.py).
# Everything lands in $OUT/gpu-check.tar.gz; the running log is $OUT/gpu-check.log. A step that
# fails is logged with its exit status and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
W=$(mktemp -d)/gpu-check
mkdir -p "$W"/raw "$W"/checks "$W"/runs "$W"/fr "$W"/pytest
exec > >(tee -a "$OUT/gpu-check.log") 2>&1

step() { printf '\n== %s %s\n' "$(date +%T)" "$*"; }
# timed NAME CMD...: run CMD, log its exit status and seconds to stderr (the status is returned),
# so that CMD's own stdout can be redirected to a file.
timed() {
  local name=$1 start=$EPOCHREALTIME rc
  shift
  "$@"
  rc=$?
  awk -v n="$name" -v rc=$rc -v a="$start" -v b="$EPOCHREALTIME" \
    'BEGIN { printf "   [%s] exit %d in %.2f s\n", n, rc, b - a }' | tee -a "$W/timings.txt" >&2
  return $rc
}

step "machine"
nvidia-smi -L; nvidia-smi --version | head -4; uname -r; python3 --version
GPU_PYTHON=$(command -v python3)   # the machine's Python, with its CUDA torch: the jobs run on it
export GPU_PYTHON

step "set-up"
if timeout 20 python3 -m pip download --no-deps -q -d /tmp/gpu-check-pip pip >/dev/null 2>&1; then
  make setup && PY=$PWD/.venv/bin/python
else
  # The machine's python3 may itself be a venv (its torch, nvidia-ml-py, pytest): install beside
  # it with --target rather than in a venv of its own, which would not see them.
  echo "no package registry: the machine's Python, plus the wheels in .whl/"
  PY=$(command -v python3)
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/rb-site .whl/*.whl
  export PYTHONPATH=/tmp/rb-site PATH="/tmp/rb-site/bin:$PATH"
fi
export PATH="$(dirname "$PY"):$PATH" PYTHONPATH="$PWD/engine${PYTHONPATH:+:$PYTHONPATH}" \
  RUNBOOK_LANG=en PYTHONUNBUFFERED=1
RB=("$PY" -m runbook)
$PY -c "import runbook, jsonschema, yaml, jinja2; print('engine', runbook.__version__)"
$PY -c "import pynvml, torch; print('pynvml', pynvml.__version__ if hasattr(pynvml, '__version__') else '?', \
'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"

step "pytest -m gpu"
timed pytest-gpu $PY -m pytest -m gpu tests/gpu -v -rs -p no:cacheprovider \
  --junitxml="$W/pytest/gpu.xml" 2>&1 | tee "$W/pytest/gpu.txt"
step "check tests beside the real driver"
timed pytest-checks timeout 180 $PY -m pytest tests/checks -q -rfs -p no:cacheprovider \
  --junitxml="$W/pytest/checks.xml" 2>&1 | tee "$W/pytest/checks.txt" | tail -40

step "raw answers for fixtures"
QUERIES=$($PY -c "from runbook.checks.gpu import gpu_smi as s; print(s.FULL_QUERY, s.REMAP_QUERY, s.APPS_QUERY)")
read -r FULL REMAP APPS <<<"$QUERIES"
CSV=--format=csv,noheader,nounits
timed smi-full nvidia-smi --query-gpu="$FULL" $CSV > "$W/raw/nvidia_smi_full.csv"
timed smi-remap nvidia-smi --query-remapped-rows="$REMAP" $CSV > "$W/raw/nvidia_smi_remap.csv"
timed smi-q nvidia-smi -q > "$W/raw/nvidia_smi_q.txt"
timed smi-qx nvidia-smi -q -x > "$W/raw/nvidia_smi_q.xml"
nvidia-smi topo -m > "$W/raw/nvidia_smi_topo.txt" 2>&1
timed nvml-idle $PY scripts/gpu/nvml_record.py > "$W/raw/nvml_idle.json"
(dmesg 2>&1 | grep -iE 'nvrm|xid|nvidia' | tail -50; echo "dmesg exit ${PIPESTATUS[0]}") > "$W/raw/dmesg_nvidia.txt"
(journalctl -k -n 5 2>&1; echo "journalctl exit $?") > "$W/raw/journalctl_k.txt"

step "a real CUDA job"
JOB_DIR=$W/job; mkdir -p "$JOB_DIR"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 setsid "$GPU_PYTHON" scripts/gpu/matmul_loop.py --seconds 150 --hold-gib 2 > "$JOB_DIR/train.log" 2>&1 &
JOB=$!
for _ in $(seq 60); do grep -q "step 3 " "$JOB_DIR/train.log" && break; sleep 1; done
head -3 "$JOB_DIR/train.log"
timed smi-apps nvidia-smi --query-compute-apps="$APPS" $CSV > "$W/raw/nvidia_smi_apps_busy.csv"
timed smi-full-busy nvidia-smi --query-gpu="$FULL" $CSV > "$W/raw/nvidia_smi_full_busy.csv"
timed nvml-busy $PY scripts/gpu/nvml_record.py > "$W/raw/nvml_busy.json"

step "runbook check, each GPU check type"
check() { local name=$1; shift; timed "check-$name" "${RB[@]}" check "$@" --format json > "$W/checks/$name.json"; }
check gpu gpu
check gpu-nvml gpu --with source=nvml
check gpu-smi gpu --with source=nvidia-smi
check torch torch --with pid=$JOB
check nccl nccl --with pid=$JOB
check process process --with pid=$JOB
check stack stack --with pid=$JOB
check host host

step "runbook run against the moving job"
timed run-gpu-hardware "${RB[@]}" run gpu-hardware --set log="$JOB_DIR/train.log" --format json \
  > "$W/runs/gpu-hardware.json"
timed run-training-hang "${RB[@]}" run training-hang --set log="$JOB_DIR/train.log" --format json \
  > "$W/runs/training-hang-moving.json"
"${RB[@]}" run training-hang --set log="$JOB_DIR/train.log" > "$W/runs/training-hang-moving.txt"
step "runbook collect on the job"
timed collect "${RB[@]}" collect --set log="$JOB_DIR/train.log" --set pid=$JOB -o "$W/runs/bundle.tar.gz" \
  --timeout 120
kill -9 -- -$JOB 2>/dev/null

step "a real CUDA out-of-memory error"
OOM_DIR=$W/oom; mkdir -p "$OOM_DIR"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 timed oom-job "$GPU_PYTHON" scripts/gpu/real_oom.py > "$OOM_DIR/train.log" 2>&1
tail -4 "$OOM_DIR/train.log"
timed run-cuda-oom "${RB[@]}" run cuda-oom --set log="$OOM_DIR/train.log" --format json > "$W/runs/cuda-oom.json"
"${RB[@]}" run cuda-oom --set log="$OOM_DIR/train.log" > "$W/runs/cuda-oom.txt"
timed run-training-hang-oom "${RB[@]}" run training-hang --set log="$OOM_DIR/train.log" --format json \
  > "$W/runs/training-hang-oom.json"
timed triage-oom "${RB[@]}" triage "$OOM_DIR/train.log" > "$W/runs/triage-oom.txt"

step "NCCL flight recorder, one rank"
timed fr-dump timeout 120 "$GPU_PYTHON" scripts/gpu/fr_dump.py "$W/fr"

step "summary"
$PY scripts/gpu/report_summary.py "$W"/runs/*.json
cat "$W/timings.txt"
tar -czf "$OUT/gpu-check.tar.gz" -C "$(dirname "$W")" gpu-check
ls -la "$OUT"
