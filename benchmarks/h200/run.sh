#!/usr/bin/env bash
# The real-hardware runs of flagos-doctor on an NVIDIA H200 (torch 2.11+cu130, triton 3.6),
# through this workplace's device tool: one STEP per call, results copied to $OUT.
#
#   bash benchmarks/h200/run.sh setup            # install the carried wheels (.whl/)
#   bash benchmarks/h200/run.sh survey 5.0.2     # survey every overload flag_gems registers
#   bash benchmarks/h200/run.sh survey 4.2.0
#   bash benchmarks/h200/run.sh probe            # probe the stack with flag_gems imported
#   bash benchmarks/h200/run.sh patients         # the probe on stacks nobody here wrote (Python 3.12 + torch)
#   bash benchmarks/h200/run.sh speed cold|warm  # pooled vs per-overload, 26 overloads
#   bash benchmarks/h200/run.sh scale            # --devices 0,1 vs one device (2 GPUs)
#
# Environment: WORKERS (pooled workers; per device for scale), DEVICES (speed: GPUs to use,
# e.g. 0), TASKS (cases | overloads: the pooled arm's --tasks), SURVEY_SECONDS (survey: stop
# and keep the journal after this long).
#
# Wheels (not in the repository; see the README, "What ran on real hardware"): .whl/deps (sqlalchemy,
# greenlet for cp312), .whl/fg5 (flag_gems 5.0.2), .whl/fg4 (flag_gems 4.2.0).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-/tmp/fd-out}
WORK=/tmp/fd
mkdir -p "$WORK" "$OUT"
install() {  # into separate targets: two flag_gems versions must never meet
  [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/deps/*.whl
  [ -d /tmp/fg5 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fg5 .whl/fg5/*.whl
  [ -d /tmp/fg4 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fg4 .whl/fg4/*.whl
}
stack_path() { case "$1" in 5*) echo /tmp/fg5;; 4*) echo /tmp/fg4;; *) echo "unknown flag_gems $1" >&2; exit 2;; esac; }
install
export PYTHONUNBUFFERED=1
step=${1:-setup}
case "$step" in
  setup)
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import sys, torch, triton, flag_gems; print(sys.version.split()[0], torch.__version__, triton.__version__, flag_gems.__version__, torch.cuda.device_count())"
    ;;
  survey)
    version=$2
    export PYTHONPATH=$(stack_path "$version"):/tmp/site:$REPO
    export TRITON_CACHE_DIR=$WORK/triton-cache-$version
    result=$WORK/flag_gems-$version.json
    # A fresh machine resumes from the committed results file (and a journal carried beside it).
    seed=surveys/results/flag_gems-$version-h200.json
    if [ ! -f "$result" ] && [ -f "$seed" ]; then
      cp "$seed" "$result"; [ -f "$seed.journal" ] && cp "$seed.journal" "$result.journal"
    fi
    # Resumable: a call cut short leaves the journal; the same command carries on.
    timeout "${SURVEY_SECONDS:-540}" python3 -m flagos_doctor survey --stack flag_gems --routes flag_gems \
      --workers "${WORKERS:-8}" --timeout 300 --no-store --quiet -o "$result" --census "$WORK/flag_gems-$version.census"
    echo "survey exit: $?"
    cp "$result" "$OUT/" 2>/dev/null; cp "$result.journal" "$OUT/" 2>/dev/null
    cp "$WORK/flag_gems-$version.census" "$OUT/" 2>/dev/null
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['summary'], sort_keys=True))" "$result"
    ;;
  probe)
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    python3 -m flagos_doctor probe --stack flag_gems --json "$OUT/probe-h200-flag_gems.json" \
      --markdown "$OUT/probe-h200-flag_gems.md" --timeout 300
    echo "probe exit: $?"
    ;;
  patients)
    # Python 3.12 with torch: nn.Module (metaclass type) through dict watchers, torch.Tensor
    # through classwrites, autoloaded plugins; the CPU machine has torch on 3.11 only.
    export PYTHONPATH=$REPO/tests/fixtures/probe_stacks:$REPO
    python3 -m flagos_doctor probe --import torchclasses --no-exercise --watch torch.nn.Module.cuda \
      --watch torch.nn.Module.register_parameter --json "$OUT/probe-h200-torchclasses.json"
    echo "probe exit: $?"
    if python3 -c "import pytest" 2>/dev/null; then
      python3 -m pytest -q -p no:cacheprovider tests/test_probe_patients.py 2>&1 | tail -25
    else
      echo "no pytest on this machine: only the probe above ran"
    fi
    ;;
  speed)
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    python3 benchmarks/survey_speed.py --stack flag_gems --count 26 --cache "$2" --workers "${WORKERS:-16}" \
      ${DEVICES:+--devices "$DEVICES"} --tasks "${TASKS:-cases}" --timeout 300 --json "$OUT/survey-speed-$2.json"
    ;;
  scale)
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    python3 benchmarks/survey_speed.py --stack flag_gems --count 26 --scale-devices 0,1 --workers "${WORKERS:-4}" --tasks "${TASKS:-cases}" \
      --timeout 300 --json "$OUT/survey-speed-2gpu.json"
    ;;
  *) echo "unknown step $step" >&2; exit 2;;
esac
