#!/usr/bin/env bash
# Decode a finished run's final models on the development split, for every fine-tune seed, and build one report of
# them (docs/claim-study.md, "Over seeds on the development split"): a run made on the test split can then be read on
# problems no choice may be made from the test split with. For each seed S (0: the arms `ntp` and `sbd`; S > 0:
# `ntp-sS`, `sbd-sS`): the NTP arm and the SBD model in NTP mode, and the SBD model with each sampler given; one score
# file each, named so the report pairs them by seed.
#
#   scripts/dev_seeds.sh RUN OUT SEEDS SAMPLERS [PROBLEMS]
#   scripts/dev_seeds.sh claim results/claim-dev-seeds "0 1 2" \
#       '[{"solver": "confidence_threshold", "threshold": 0.999},
#         {"solver": "confidence_threshold", "threshold": 0.999, "first_token": "ntp"}]'
#
# RUN: a run folder under results/ (its final models in models/tiny-llama/); OUT: the output folder
# (benchmark files, generations, scores, report/); SAMPLERS: a JSON list of sampler entries as in decode.samplers (one
# value each); PROBLEMS: development problems a task (default 500). Tasks: math_graded and code_graded; model:
# tiny-llama; decode settings: the claim config's (blocks of 6, 50 rows, float32 on the CPU, one thread). A decode or
# score file already there is kept (rerun after an interruption: only what is missing runs).
set -euo pipefail
RUN=${1:?usage: scripts/dev_seeds.sh RUN OUT SEEDS SAMPLERS [PROBLEMS]}
OUT=${2:?usage: scripts/dev_seeds.sh RUN OUT SEEDS SAMPLERS [PROBLEMS]}
SEEDS=${3:?usage: scripts/dev_seeds.sh RUN OUT SEEDS SAMPLERS [PROBLEMS]}
SAMPLERS=${4:?usage: scripts/dev_seeds.sh RUN OUT SEEDS SAMPLERS [PROBLEMS]}
PROBLEMS=${5:-500}
PYTHON=${PYTHON:-python}
MODELS="results/$RUN/models/tiny-llama"
[ -d "$MODELS" ] || { echo "error: $MODELS not found: run the workflow for $RUN first" >&2; exit 1; }
# one line per sampler: its tag, a tab, its spec (ntp first)
SPECS=$("$PYTHON" -c 'import json, sys; from sbd_core.samplers import expand_samplers
for tag, spec in expand_samplers([{"solver": "ntp"}] + json.loads(sys.argv[1])).items(): print(tag, json.dumps(spec), sep="\t")' \
    "$SAMPLERS")
DECODE='{"block_size": 6, "batch_size": 50}'
RUNTIME='{"device": "cpu", "dtype": "float32"}'
STEPS=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["settings"]["finetune"]["max_steps"])' \
    "$MODELS/sbd/provenance.json")
mkdir -p "$OUT/benchmarks" "$OUT/logs" "$OUT/work"
scores=()
for task in math_graded code_graded; do
    settings="{\"limit\": $PROBLEMS, \"split\": \"dev\"}"
    test_file="$OUT/benchmarks/${task}_test.jsonl"
    [ -f "$test_file" ] || "$PYTHON" -m sbd_core benchmark --name "$task" --settings "$settings" --out "$OUT/benchmarks" \
        < /dev/null
    for seed in $SEEDS; do
        suffix=$([ "$seed" = 0 ] && echo "" || echo "-s$seed")
        for arm in ntp sbd; do
            while IFS=$'\t' read -r tag spec; do
                [ "$arm" = ntp ] && [ "$tag" != ntp ] && continue
                gen="$OUT/generations/$arm$suffix/$tag/$task.jsonl"
                score="$OUT/scores/$arm$suffix/$tag/$task.json"
                log="$OUT/logs/$arm$suffix-$tag-$task"
                mkdir -p "$(dirname "$gen")" "$(dirname "$score")"
                if [ ! -f "$gen" ]; then
                    echo "decode $arm$suffix $tag $task" >&2
                    "$PYTHON" -m sbd_core --threads 1 decode --model "$MODELS/$arm$suffix" --benchmark "$task" \
                        --settings "$settings" --test-file "$test_file" --sampler-spec "$spec" \
                        --decode-spec "$DECODE" --runtime "$RUNTIME" --out "$gen" < /dev/null > "$log.decode" 2>&1 ||
                        { tail -3 "$log.decode" >&2; exit 1; }
                fi
                if [ ! -f "$score" ]; then
                    names="{\"model\": \"tiny-llama\", \"objective\": \"$arm\", \"sampler\": \"$tag\", \"train_seed\": $seed, \"train_steps\": $STEPS}"
                    "$PYTHON" -m sbd_core score --benchmark "$task" --generations "$gen" --data "$test_file" \
                        --settings "$settings" --names "$names" --work-dir "$OUT/work" --out "$score" \
                        < /dev/null > "$log.score" 2>&1 || { tail -3 "$log.score" >&2; exit 1; }
                fi
                scores+=("$score")
            done <<< "$SPECS"
        done
    done
done
"$PYTHON" -m sbd_core report --scores "${scores[@]}" --out "$OUT/report" > "$OUT/logs/report.log" 2>&1 ||
    { tail -3 "$OUT/logs/report.log" >&2; exit 1; }
echo "report: $OUT/report/report.md, $OUT/report/summary.csv" >&2
