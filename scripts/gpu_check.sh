#!/usr/bin/env bash
# The GPU check: what a session with a GPU runs first (<= 8 minutes on an H200), each step under a share of one
# deadline, everything it measures under results/gpu/ with its provenance:
#   1. tests/test_gpu.py: FlexAttention training with backward, the decoder and the fast engine against the reference
#      (the dry run adds tests/test_engine_compile.py's default tier: the compiled step traced with fullgraph=True on the
#      CPU, the CUDA configuration's FlexAttention checked against the dense plan: a graph break fails the step)
#   2. time(k) on the 8B shape with random weights: python -m sbd_core timing --shape llama-3.1-8b ... --out timing.json
#   3. bench_decode on the 8B shape: the engine (compiled) against eager generate, batch 1, NTP and SBD
#   4. fine-tune tokens/s: benchmarks/bench_train.py --preset llama8b --layers 1 2 (for the paper run's cost)
#   5. the pilot (config/pilot.yaml) at a short budget: a few optimizer steps per arm, a few GSM8K-schema stand-in
#      problems written here (no data download), short timing and speed stages, no likelihood tasks; its model is
#      pilot.yaml's hub source, or --pilot-model DIR (a local checkpoint folder) on a machine without the hub
# Files: provenance.json (command, git commit, versions, device), steps.json (per step: command, exit status, seconds,
# timed out), <step>.log (stdout and stderr), <step>.json (the step's last-line JSON document, where it prints one),
# timing.json (the time(k) file), tests.xml (JUnit), pilot/ (the pilot's report and train logs). A failed or timed-out
# step is recorded and the next one runs; the exit status is 1 when any step failed.
#
#   scripts/gpu_check.sh [--out DIR] [--deadline-s S] [--pilot-model DIR]     # a CUDA machine
#   scripts/gpu_check.sh --dry-run [--out DIR]      # the CPU path: tiny shapes, the same steps in seconds, the pilot
#                                                   # as a snakemake dry run (default out: $TMPDIR/gpu_check_dry_run)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COMMAND="$0 $*"
PYTHON=${PYTHON:-python}
DRY=0 OUT="" DEADLINE_S=470 PILOT_MODEL=""
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT=${2:?--out needs a folder}; shift ;;
    --deadline-s) DEADLINE_S=${2:?--deadline-s needs seconds}; shift ;;
    --pilot-model) PILOT_MODEL=${2:?--pilot-model needs a checkpoint folder}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown argument $1 (expected --dry-run, --out DIR, --deadline-s S, --pilot-model DIR)" >&2
       exit 2 ;;
  esac
  shift
done
if [ $DRY = 1 ]; then OUT=${OUT:-${TMPDIR:-/tmp}/gpu_check_dry_run}; else OUT=${OUT:-$ROOT/results/gpu}; fi
if ! [[ $DEADLINE_S =~ ^[0-9]+$ ]]; then
  echo "error: --deadline-s $DEADLINE_S is not a whole number of seconds" >&2; exit 2
fi
if [ -n "$PILOT_MODEL" ] && [ ! -f "$PILOT_MODEL/config.json" ]; then
  echo "error: --pilot-model $PILOT_MODEL is not a checkpoint folder (no config.json)" >&2; exit 2
fi
cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ $DRY = 0 ] && ! "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  echo "error: no CUDA device visible to $PYTHON; on a CPU machine run scripts/gpu_check.sh --dry-run" >&2; exit 2
fi
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
START=$(date +%s)
STEPS="$OUT/steps.jsonl"
: > "$STEPS"
FAILED=0

# provenance: the command, the commit, the versions and the device
"$PYTHON" - "$OUT/provenance.json" "$DRY" "$COMMAND" <<'EOF'
import json, os, platform, subprocess, sys, time
import torch, transformers
from sbd_core.timing import device_name
out, dry, command = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip() or None  # None: no git
cuda = torch.cuda.is_available()
json.dump({"command": command, "dry_run": dry, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "git_commit": git("rev-parse", "HEAD"),
           "git_dirty": git("status", "--porcelain", "--untracked-files=no") is not None,
           "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "cuda": torch.version.cuda, "device": device_name("cuda" if cuda else "cpu"),
           "device_count": torch.cuda.device_count(), "cpu_count": os.cpu_count()},
          open(out, "w"), indent=1)
EOF

# step NAME TIMEOUT_S COMMAND...: run it under min(TIMEOUT_S, what is left of the deadline), log it, record it
step() {
  local name=$1 limit=$2; shift 2
  local left=$(( DEADLINE_S - ($(date +%s) - START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  local rc=124 t0; t0=$(date +%s)
  rm -f "$OUT/$name.log" "$OUT/$name.json"  # nothing stale from an earlier run
  echo "== $name (at most ${limit}s): $*"
  if [ "$limit" -gt 0 ]; then timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1; rc=$?; fi
  local seconds=$(( $(date +%s) - t0 ))
  [ $rc = 0 ] || FAILED=1
  echo "   exit $rc after ${seconds}s (log: $OUT/$name.log)"
  "$PYTHON" - "$OUT" "$name" "$rc" "$seconds" "$limit" "$@" <<'EOF'
import json, os, sys
out, name, (rc, seconds, limit), command = sys.argv[1], sys.argv[2], map(int, sys.argv[3:6]), sys.argv[6:]
lines = open(f"{out}/{name}.log", errors="replace").read().strip().splitlines() 
try:
    doc = json.loads(lines[-1]) if lines else None
except ValueError:
    doc = None
if isinstance(doc, dict) and not os.path.exists(f"{out}/{name}.json"):  # timing writes its own file
    json.dump(doc, open(f"{out}/{name}.json", "w"), indent=1)
with open(f"{out}/steps.jsonl", "a") as f:
    f.write(json.dumps({"step": name, "command": command, "exit_status": rc, "seconds": seconds, "limit_s": limit,
                        "timed_out": rc in (124, 137),
                        "json": f"{name}.json" if isinstance(doc, dict) else None}) + "\n")
EOF
}

# the pilot's config at a short budget, with GSM8K-schema stand-in problems (config/pilot.yaml otherwise)
pilot_config() {
  "$PYTHON" - "$OUT/pilot" "$DRY" "$PILOT_MODEL" <<'EOF'
import json, pathlib, sys, yaml
root, dry, model = pathlib.Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
root.mkdir(parents=True, exist_ok=True)
def records(numbers):
    return [{"question": f"Tom has {n} apples and buys {n + 1} more. How many?",
             "answer": f"{n}+{n + 1}=<<{n}+{n + 1}={2 * n + 1}>>{2 * n + 1}\n#### {2 * n + 1}"} for n in numbers]
for name, numbers in (("train", range(64)), ("test", range(100, 108))):
    (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records(numbers)))
config = yaml.safe_load(open("config/pilot.yaml"))
if model:
    config["models"] = {"pilot-model": {"source": "local", "path": str(pathlib.Path(model).resolve())}}
if dry:
    config["runtime"] = {"device": "cpu", "dtype": "float32", "threads": 2}
config["data"]["sources"] = [{"name": "gsm8k", "path": str(root / "train.jsonl")}]
config["benchmarks"] = {"gsm8k": {"data": str(root / "test.jsonl"), "limit": 8, "max_new_tokens": 64}}
config["finetune"].update(max_steps=4, tokens_per_step=8192, batch_size=8, max_length=1024, warmup_steps=1,
                          save_steps=4, logging_steps=1, bf16=not dry)
config.pop("likelihood", None)  # Table 2's tasks download lm-eval's data sets: not a short check
config["timing"] = {"widths": [1, 16], "kv_lens": [64, 512], "warmup": 2, "repeats": 5, "rounds": 3}
config["speed"] = {"problems": 8, "rounds": 3}  # every run and the A/A control on the 8 problems, 3 rounds
config["decode"].update(batch_size=8, samplers=[{"solver": "ntp"}, {"solver": "eb", "gamma": 0.1}],
                        restrict={"sbd": ["eb-entropy-g0.1"]})
(root / "pilot_short.yaml").write_text(yaml.safe_dump(config))
EOF
}

if [ $DRY = 1 ]; then
  TESTS=(tests/test_gpu.py tests/test_engine_compile.py -m "gpu or not slow")
  DEV=(--device cpu) SHAPE=(--shape tiny-llama)
  TIMING=(--batch 1 --width 1 4 --block-size 4 --kv-len 16 --warmup 1 --repeats 2 --budget-s 5)
  DECODE=(--batch 1 --prompts 1 --max-new-tokens 4 --block-size 4 --gamma inf --repeats 1 --decoders generate engine)
  TRAIN=(--preset tiny --layers 1 --row-tokens 64 --doc-tokens 32 --batch 1 --attention sdpa --repeats 1)
  SNAKE=(-n)
else
  TESTS=(tests/test_gpu.py -m gpu)
  DEV=(--device cuda) SHAPE=(--shape llama-3.1-8b)
  TIMING=(--batch 1 8 32 --width 1 4 8 16 --block-size 16 --kv-len 512 4096 --compile --budget-s 60)
  DECODE=(--batch 1 --prompts 2 --max-new-tokens 64 --gamma 0 inf --repeats 2 --decoders generate engine)
  TRAIN=(--preset llama8b --layers 1 2 --row-tokens 8192 --attention flex --repeats 2)
  SNAKE=(--resources gpu=1)
fi

step tests 150 "$PYTHON" -m pytest -q -n 0 -p no:cacheprovider "${TESTS[@]}" --junitxml="$OUT/tests.xml"
[ $DRY = 1 ] && grep -q 'skipped="[1-9]' "$OUT/tests.xml" && echo "   (CPU: the GPU tests skip)"
step timing 120 "$PYTHON" -m sbd_core timing "${SHAPE[@]}" "${DEV[@]}" "${TIMING[@]}" --out "$OUT/timing.json"
step bench_decode 90 "$PYTHON" benchmarks/bench_decode.py "${SHAPE[@]}" "${DEV[@]}" "${DECODE[@]}"
step bench_train 90 "$PYTHON" benchmarks/bench_train.py "${DEV[@]}" "${TRAIN[@]}"
pilot_config
PILOT_WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_pilot.XXXXXX")  # checkpoints stay out of results/gpu/
step pilot 240 "$PYTHON" -m snakemake -s "$ROOT/Snakefile" --directory "$PILOT_WORK" --cores all "${SNAKE[@]}" \
  --configfile "$OUT/pilot/pilot_short.yaml"
(cd "$PILOT_WORK" && find results \( -path '*/report/*' -o -name train_log.jsonl \) -type f \
  -exec cp --parents {} "$OUT/pilot" \;) 2>/dev/null
rm -rf "$PILOT_WORK"

"$PYTHON" - "$OUT" "$(( $(date +%s) - START ))" <<'EOF'
import json, sys
out, total = sys.argv[1], int(sys.argv[2])
steps = [json.loads(line) for line in open(f"{out}/steps.jsonl")]
json.dump({"total_seconds": total, "steps": steps}, open(f"{out}/steps.json", "w"), indent=1)
print(f"gpu_check: {sum(s['exit_status'] == 0 for s in steps)}/{len(steps)} steps passed in {total}s; files in {out}")
EOF
rm -f "$STEPS"
exit $FAILED
