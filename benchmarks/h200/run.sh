#!/usr/bin/env bash
# The real-hardware runs of flagos-doctor on an NVIDIA H200 (torch 2.11+cu130, triton 3.6),
# through this workplace's device tool: one STEP per call, results copied to $OUT.
#
#   bash benchmarks/h200/run.sh setup            # install the carried wheels (.whl/)
#   bash benchmarks/h200/run.sh survey 5.0.2     # survey every overload flag_gems registers
#   bash benchmarks/h200/run.sh survey 4.2.0
#   bash benchmarks/h200/run.sh stock 5.0.2      # the same route set on stock torch (--stack torch)
#   bash benchmarks/h200/run.sh again 5.0.2      # a second, fresh survey of 5.0.2; compare the censuses
#   bash benchmarks/h200/run.sh probe            # probe the stack with flag_gems imported
#   bash benchmarks/h200/run.sh patients         # the probe on stacks nobody here wrote (Python 3.12 + torch)
#   bash benchmarks/h200/run.sh speed cold|warm  # pooled vs per-overload, 26 overloads
#   bash benchmarks/h200/run.sh scale            # --devices 0,1 vs one device (2 GPUs)
#   bash benchmarks/h200/run.sh torchfl-survey    # the ready torch_fl 1adbc97 build, its flagos_python routes
#   bash benchmarks/h200/run.sh torchfl-alone     # the same routes through flag_gems alone
#   bash benchmarks/h200/run.sh torchfl-attribute # whose is each torch_fl failure (no GPU needed)
#   bash benchmarks/h200/run.sh torchfl-commits   # build 5c9d6f4 and ceb4821, survey, compare
#                                                 # (surveys/h200/torch-fl-compare-plan.md)
#   bash benchmarks/h200/run.sh full cold        # the whole route set, empty caches (resumable:
#   bash benchmarks/h200/run.sh full warm        #   call a phase again until it says complete)
#   bash benchmarks/h200/run.sh full reference   # one process per overload, 26 of them, cold
#   bash benchmarks/h200/run.sh full reference-warm   # the same on the warm caches
#   bash benchmarks/h200/run.sh torch_fl ready   # probe + report of the ready 1adbc97 build
#   bash benchmarks/h200/run.sh explain          # explain -- python3 -m pytest test_explain_compile.py
#                                                # on the ready 1adbc97 build, and report --explain
#                                                # (docs/explain.md; needs pytest: its wheels in .whl/deps)
#   bash benchmarks/h200/run.sh pace torch_fl|flag_gems|compare  # issue 32: plain default commands,
#                                                # fresh HOME, cold then warm, timed (pace.py)
#   bash benchmarks/h200/run.sh torch_fl build A B  # build commits A and B of the history
#                                                # bundle (torch_fl_build), probe each
#
# Environment: WORKERS (pooled workers; per device for scale; full: default the survey's own
# pick), DEVICES (speed, full: GPUs to use,
# e.g. 0), TASKS (cases | overloads: the pooled arm's --tasks), SURVEY_SECONDS (survey: stop
# and keep the journal after this long), HINTS (full cold|warm: timing hints, --hints; HINTS=1
# is the committed surveys/results/flag_gems-5.0.2-h200.json, any other value a results file:
# the slow cases start first on a fresh machine; the benchmark JSON records it). TORCH_FL_SHARED (torch_fl step): the folder holding
# shared/torch-fl's files (default: shared/torch-fl, else ../shared/torch-fl).
#
# Wheels (not in the repository; see docs/hardware.md): .whl/deps (sqlalchemy,
# greenlet for cp312), .whl/fg5 (flag_gems 5.0.2), .whl/fg4 (flag_gems 4.2.0); for the torchfl
# steps also .whl/tfl/ with ../shared/torch-fl/torch_fl-1adbc97-py312-torch2.11.0cu130-h200.tar.gz
# and ../shared/torch-fl/Torch-FL-history.bundle.
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
torch_fl_ready() {  # the ready 1adbc97 build, unpacked once (a plain folder put on PYTHONPATH)
  [ -d /tmp/tfl/h200_bundle/torch_fl ] || { mkdir -p /tmp/tfl && tar xzf .whl/tfl/torch_fl-1adbc97-*.tar.gz -C /tmp/tfl; }
  echo /tmp/tfl/h200_bundle
}
# Resumable survey: a fresh machine starts from the committed file (and journal) when there is one.
seed_from() {
  local seed=$1 result=$2
  if [ ! -f "$result" ] && [ -f "$seed" ]; then
    cp "$seed" "$result"; [ -f "$seed.journal" ] && cp "$seed.journal" "$result.journal"
  fi
}
keep() { for f in "$@"; do cp "$f" "$OUT/" 2>/dev/null; done; }
TFL_RESULT=$WORK/torch_fl-1adbc97-flag_gems-5.0.2.json
ALONE_RESULT=$WORK/flag_gems-5.0.2-torch_fl-routes.json
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
    # A fresh machine resumes from the committed results file (and a journal carried beside it),
    # when that file was made by this harness version (another one would be refused).
    seed=surveys/results/flag_gems-$version-h200.json
    if [ ! -f "$result" ] && [ -f "$seed" ] && python3 -c "import json,sys; from flagos_doctor.results import model; sys.exit(json.load(open(sys.argv[1]))['comparable']['harness_version'] != model.HARNESS_VERSION)" "$seed"; then
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
  stock|again)
    # stock: stock torch (nothing enabled) on the route set flag_gems $2 registers: which cases
    # torch itself answers differently on the GPU and the CPU. again: a second survey of flag_gems
    # $2 from scratch (not resumed), then its census against the first run's (byte-identical?).
    version=$2
    export PYTHONPATH=$(stack_path "$version"):/tmp/site:$REPO
    export TRITON_CACHE_DIR=$WORK/triton-cache-$version
    if [ "$step" = stock ]; then name=stock-torch-routes-flag_gems-$version; stack=torch; else name=flag_gems-$version-again; stack=flag_gems; fi
    result=$WORK/$name.json
    timeout "${SURVEY_SECONDS:-540}" python3 -m flagos_doctor survey --stack "$stack" --routes flag_gems \
      --workers "${WORKERS:-8}" --timeout 300 --no-store --quiet -o "$result" --census "$WORK/$name.census"
    echo "survey exit: $?"
    cp "$result" "$OUT/" 2>/dev/null; cp "$result.journal" "$OUT/" 2>/dev/null; cp "$WORK/$name.census" "$OUT/" 2>/dev/null
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['summary'], sort_keys=True))" "$result"
    if [ "$step" = again ] && [ -f "$WORK/flag_gems-$version.census" ] && [ -f "$WORK/$name.census" ]; then
      cmp "$WORK/flag_gems-$version.census" "$WORK/$name.census" && echo "census byte-identical: yes"
      python3 -m flagos_doctor survey --compare "$WORK/flag_gems-$version.json" "$result" --fail-on any \
        --markdown "$OUT/compare-$version-again.md" > "$OUT/compare-$version-again.txt"; echo "compare exit: $?"
    fi
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
      python3 -m pytest -q -rA -p no:cacheprovider tests/test_probe_patients.py > "$OUT/patients-pytest.log" 2>&1
      echo "patients pytest exit: $?"; tail -40 "$OUT/patients-pytest.log"
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
  torchfl-survey)
    tfl=$(torch_fl_ready)
    export PYTHONPATH=$tfl:/tmp/fg5:/tmp/site:$REPO
    export TRITON_CACHE_DIR=$WORK/triton-cache-torch_fl
    seed_from surveys/results/torch_fl-1adbc97-flag_gems-5.0.2-h200.json "$TFL_RESULT"
    # --torch-fl-commit: the ready build is a plain folder that records no commit (issue 12).
    timeout "${SURVEY_SECONDS:-540}" python3 -m flagos_doctor survey --stack torch_fl \
      --conf "$tfl/torch_fl/configs/backends_flaggems.conf" --torch-fl-commit 1adbc97 \
      --workers "${WORKERS:-8}" --timeout 300 --no-store --quiet -o "$TFL_RESULT" --census "${TFL_RESULT%.json}.census"
    echo "survey exit: $?"
    keep "$TFL_RESULT" "$TFL_RESULT.journal" "${TFL_RESULT%.json}.census"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['summary'], sort_keys=True)); print(json.dumps(d['provenance'].get('flag_gems_bindings'))[:2000])" "$TFL_RESULT"
    ;;
  torchfl-alone)
    tfl=$(torch_fl_ready)  # only its conf: flag_gems alone never imports torch_fl
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    export TRITON_CACHE_DIR=$WORK/triton-cache-5.0.2
    seed_from surveys/results/flag_gems-5.0.2-torch_fl-routes-h200.json "$ALONE_RESULT"
    # OPS (optional): only these overloads, e.g. the torch_fl survey's failing ones (attribution
    # needs no more).
    timeout "${SURVEY_SECONDS:-540}" python3 -m flagos_doctor survey --stack flag_gems \
      --conf "$tfl/torch_fl/configs/backends_flaggems.conf" ${OPS:+--ops "$OPS"} \
      --workers "${WORKERS:-8}" --timeout 300 --no-store --quiet -o "$ALONE_RESULT" --census "${ALONE_RESULT%.json}.census"
    echo "survey exit: $?"
    keep "$ALONE_RESULT" "$ALONE_RESULT.journal" "${ALONE_RESULT%.json}.census"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['summary'], sort_keys=True))" "$ALONE_RESULT"
    ;;
  torchfl-attribute)
    export PYTHONPATH=$REPO
    a=$TFL_RESULT; [ -f "$a" ] || a=surveys/results/torch_fl-1adbc97-flag_gems-5.0.2-h200.json
    b=$ALONE_RESULT; [ -f "$b" ] || b=surveys/results/flag_gems-5.0.2-torch_fl-routes-h200.json
    python3 -m flagos_doctor survey --compare "$a" "$b" --attribute \
      --json "$OUT/torch_fl-vs-flag_gems-5.0.2.json" --markdown "$OUT/torch_fl-vs-flag_gems-5.0.2.md"
    echo "attribute exit: $?"
    ;;
  torchfl-commits)
    # A = 5c9d6f4 (ceb4821^), B = ceb4821 "forward gems' required keyword-only out"; both arms
    # over B's conf (same route set: comparable). Each arm is built (python -m
    # flagos_doctor.torch_fl_build, issue 12) and surveyed, then filed in the store: a call cut
    # short by the 9-minute limit finds the finished arm in $WORK/store and carries on.
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    export TRITON_CACHE_DIR=$WORK/triton-cache-torch_fl
    [ -d $WORK/Torch-FL ] || git clone -q .whl/tfl/Torch-FL-history.bundle $WORK/Torch-FL
    # A fresh machine carries on from the store a previous call left in $OUT/store (carried
    # back as .whl/store.tar): an arm surveyed there is not built again.
    [ -d $WORK/store ] || { [ -f .whl/store.tar ] && mkdir -p $WORK/store && tar xf .whl/store.tar -C $WORK/store; }
    git -C $WORK/Torch-FL show ceb4821:torch_fl/configs/backends_flaggems.conf > $WORK/backends_flaggems-ceb4821.conf
    # COMMIT_OPS (optional) replaces the sample below, e.g. to fit what device time is left;
    # set and empty (COMMIT_OPS=) it surveys the whole conf.
    OPS=sum.out,sum.IntList_out,cumsum.out,mm.out,softshrink.out,where.self_out,addmm.dtype_out
    OPS=${COMMIT_OPS-$OPS,abs,add.Tensor,mul_.Tensor,mm,bmm,_softmax,sum,sum.dim_IntList,cumsum,where.self,exp}
    timeout "${SURVEY_SECONDS:-540}" python3 -m flagos_doctor survey --compare 5c9d6f4 ceb4821 \
      --repo $WORK/Torch-FL --build-cmd 'python3 -m flagos_doctor.torch_fl_build .' \
      --stack torch_fl --conf $WORK/backends_flaggems-ceb4821.conf ${OPS:+--ops "$OPS"} \
      --workers "${WORKERS:-8}" --timeout 300 --store $WORK/store \
      --json "$OUT/compare-5c9d6f4-ceb4821.json" --markdown "$OUT/compare-5c9d6f4-ceb4821.md"
    echo "compare exit: $?"
    # One file: the device tool returns nothing deeper than two folders under $OUT.
    tar cf "$OUT/store.tar" -C $WORK/store . 2>/dev/null
    ;;
  full)  # state in $WORK/full survives between calls while the machine stays warm
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    python3 benchmarks/survey_full.py "$2" --stack flag_gems --state "$WORK/${STATE:-full}" --out "$OUT" \
      ${WORKERS:+--workers "$WORKERS"} ${DEVICES:+--devices "$DEVICES"} ${TIMEOUT:+--timeout "$TIMEOUT"} --deadline "${SURVEY_SECONDS:-480}" \
      ${HINTS:+--hints "$( [ "$HINTS" = 1 ] && echo surveys/results/flag_gems-5.0.2-h200.json || echo "$HINTS" )"}
    echo "full $2 exit: $?"
    cp "$WORK/${STATE:-full}/state.json" "$OUT/survey-full-state.json" 2>/dev/null
    # The phase's results and census: cold is also the committed flag_gems survey (issue 14),
    # warm its second run (census byte-identical?).
    for name in results census; do
      cp "$WORK/${STATE:-full}/$2.$name" "$OUT/survey-full-$2.$name" 2>/dev/null
      cp "$WORK/${STATE:-full}/$2.$name.journal" "$OUT/survey-full-$2.$name.journal" 2>/dev/null
    done
    if [ "$2" = warm ]; then  # (an if: a bare test would be the step's exit status)
      cmp "$WORK/${STATE:-full}/cold.census" "$WORK/${STATE:-full}/warm.census" && echo "census byte-identical to cold: yes"
    fi
    ;;
  torch_fl)
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    shared=${TORCH_FL_SHARED:-$( [ -d shared/torch-fl ] && echo shared/torch-fl || echo ../shared/torch-fl )}
    probe_and_report() {  # $1: import path of a torch_fl build, $2: a name for the files
      PYTHONPATH=$1:$PYTHONPATH python3 -m flagos_doctor probe --stack torch_fl --timeout 300 \
        --json "$OUT/probe-h200-torch_fl-$2.json" --markdown "$OUT/probe-h200-torch_fl-$2.md"
      echo "probe $2 exit: $?"
      PYTHONPATH=$1:$PYTHONPATH python3 -m flagos_doctor report --stack torch_fl --timeout 300 ${3:+--torch-fl-commit "$3"} \
        --json "$OUT/report-h200-torch_fl-$2.json" --markdown "$OUT/report-h200-torch_fl-$2.md"
      echo "report $2 exit: $?"
    }
    case "${2:-ready}" in
      ready)  # records no commit: the report is told (--torch-fl-commit) and says so
        mkdir -p /tmp/tfl-ready && tar xzf "$shared"/torch_fl-1adbc97-py312-torch2.11.0cu130-h200.tar.gz -C /tmp/tfl-ready
        probe_and_report /tmp/tfl-ready/h200_bundle ready 1adbc97
        ;;
      build)  # recipe B through the project's build helper, cached in ~/.cache/flagos-doctor
        [ -d /tmp/Torch-FL ] || git clone -q "$shared"/Torch-FL-history.bundle /tmp/Torch-FL
        for commit in "${@:3}"; do
          line=$(python3 -m flagos_doctor.torch_fl_build /tmp/Torch-FL --commit "$commit" --jobs "$(nproc)" 2>"$OUT/build-$commit.log")
          echo "build $commit exit: $? -> $line"
          [ -n "$line" ] && probe_and_report "${line##*PYTHONPATH=}" "$commit"
        done
        ;;
    esac
    ;;
  explain)  # the user's own failing test, watched: a model compiled on the ready torch_fl 1adbc97
    export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
    shared=${TORCH_FL_SHARED:-$( [ -d shared/torch-fl ] && echo shared/torch-fl || echo ../shared/torch-fl )}
    [ -d /tmp/tfl-ready/h200_bundle ] || { mkdir -p /tmp/tfl-ready && tar xzf "$shared"/torch_fl-1adbc97-py312-torch2.11.0cu130-h200.tar.gz -C /tmp/tfl-ready; }
    python3 -c "import pytest" 2>/dev/null || { echo "no pytest here: put its wheels (pytest, pluggy, iniconfig) in .whl/deps" >&2; exit 2; }
    PYTHONPATH=/tmp/tfl-ready/h200_bundle:$PYTHONPATH python3 -m flagos_doctor explain --stack torch_fl \
      --json "$OUT/explain-h200-torch_fl-ready.json" --markdown "$OUT/explain-h200-torch_fl-ready.md" \
      -- python3 -m pytest -q -p no:cacheprovider benchmarks/h200/test_explain_compile.py \
      > "$OUT/explain-h200-torch_fl-ready.out" 2>&1
    echo "explain exit: $?"
    tail -40 "$OUT/explain-h200-torch_fl-ready.out"
    PYTHONPATH=/tmp/tfl-ready/h200_bundle:$PYTHONPATH python3 -m flagos_doctor report --stack torch_fl --timeout 300 \
      --torch-fl-commit 1adbc97 --explain "$OUT/explain-h200-torch_fl-ready.json" \
      --json "$OUT/report-h200-torch_fl-explain.json" --markdown "$OUT/report-h200-torch_fl-explain.md"
    echo "report --explain exit: $?"
    ;;
  pace)  # issue 32: plain default commands, a fresh HOME (so fresh Triton, FlagGems and build
    # caches and a fresh store) per stack; cold, then warm on what cold left. $2: torch_fl |
    # flag_gems | compare. Each run's command, seconds, exit and figures: $OUT/<name>.json
    # (benchmarks/h200/pace.py), beside the results files and censuses.
    what=$2
    commit=${FLAGOS_DOCTOR_COMMIT:-unknown}
    export HOME=$WORK/home-$what; rm -rf "$HOME" /tmp/torchinductor_*; mkdir -p "$HOME"
    unset TRITON_CACHE_DIR XDG_DATA_HOME XDG_CACHE_HOME FLAGOS_DOCTOR_STORE
    run_dir=$WORK/run-$what; rm -rf "$run_dir"; mkdir -p "$run_dir"
    pace() { python3 "$REPO/benchmarks/h200/pace.py" --commit "$commit" --out "$OUT" "$@"; }
    case "$what" in
      torch_fl)
        tfl=$(torch_fl_ready)
        export PYTHONPATH=$tfl:/tmp/fg5:/tmp/site:$REPO
        for phase in cold warm; do
          (cd "$run_dir" && pace --name "torch_fl-1adbc97-$phase" --results "$phase.json" --census "$phase.census" -- \
            timeout 560 python3 -m flagos_doctor survey --stack torch_fl --conf "$tfl/torch_fl/configs/backends_flaggems.conf" \
            -o "$phase.json" --census "$phase.census" 2> "$run_dir/$phase.log")
          tail -5 "$run_dir/$phase.log"
          cp "$run_dir/$phase.json" "$OUT/torch_fl-1adbc97-$phase.results.json"; cp "$run_dir/$phase.census" "$OUT/torch_fl-1adbc97-$phase.census"
        done
        cmp "$run_dir/cold.census" "$run_dir/warm.census" && echo "census byte-identical: yes"
        ;;
      flag_gems)
        export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
        for phase in cold warm; do
          (cd "$run_dir" && pace --name "survey-full-$phase" --results "$phase.json" --census "$phase.census" -- \
            timeout 400 python3 -m flagos_doctor survey --stack flag_gems --routes flag_gems \
            -o "$phase.json" --census "$phase.census" 2> "$run_dir/$phase.log")
          tail -5 "$run_dir/$phase.log"
          cp "$run_dir/$phase.census" "$OUT/survey-full-$phase.census"; cp "$run_dir/$phase.json" "$OUT/survey-full-$phase.results.json"
        done
        cmp "$run_dir/cold.census" "$run_dir/warm.census" && echo "census byte-identical: yes"
        sha256sum "$run_dir"/*.census
        ;;
      compare)
        export PYTHONPATH=/tmp/fg5:/tmp/site:$REPO
        git clone -q .whl/tfl/Torch-FL-history.bundle "$run_dir/Torch-FL"
        git -C "$run_dir/Torch-FL" show ceb4821:torch_fl/configs/backends_flaggems.conf > "$run_dir/backends_flaggems-ceb4821.conf"
        (cd "$run_dir" && pace --name compare-one-call --results compare.json -- \
          timeout ${COMPARE_SECONDS:-580} python3 -m flagos_doctor survey --compare 5c9d6f4 ceb4821 --repo Torch-FL \
          --build-cmd 'python3 -m flagos_doctor.torch_fl_build .' --stack torch_fl --conf backends_flaggems-ceb4821.conf \
          --json compare.json --markdown compare.md 2> "$run_dir/compare.log")
        tail -30 "$run_dir/compare.log"
        cp "$run_dir/compare.json" "$OUT/compare-5c9d6f4-ceb4821-one-call.json"; cp "$run_dir/compare.md" "$OUT/compare-5c9d6f4-ceb4821-one-call.md"
        (cd "$HOME/.local/share/flagos-doctor/results" && tar cf "$OUT/store.tar" survey culprits 2>/dev/null)
        ;;
    esac
    ;;
  *) echo "unknown step $step" >&2; exit 2;;
esac
