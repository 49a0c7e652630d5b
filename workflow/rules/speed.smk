# Wall-clock: one job per (model, benchmark) times every decode run of the model (and an A/A control: the NTP arm twice)
# on speed.problems test problems at batch 1 and decode.batch_size, over speed.rounds interleaved rounds
# (sbd_core.pipeline.speed). It claims every core of the run (threads), so no other job runs beside it, and loads each
# arm's model once; it needs the decode jobs' generations (what it times must decode their tokens).
rule speed:
    input:
        models=lambda wc: sorted({row["model"] for row in speed_rows(wc)}),
        generations=lambda wc: [row["generations"] for row in speed_rows(wc)],
        test=f"{RUN}/benchmarks/{{benchmark}}_test.jsonl",
    output:
        f"{RUN}/speed/{{model}}/{{benchmark}}.json",
    params:
        rows=lambda wc: arg(speed_rows(wc)),
        settings=lambda wc: arg(BENCHMARKS[wc.benchmark]),
        decode=arg(section("decode", drop=("samplers", "restrict"))),
        speed=arg(section("speed")),
        runtime=arg({"device": RUNTIME.device, "dtype": RUNTIME.dtype}),
        threads=RUNTIME.threads,
    threads: TIMED_THREADS
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/speed/{{model}}/{{benchmark}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {params.threads} --no-progress speed --rows {params.rows:q}"
        " --model-name {wildcards.model} --benchmark {wildcards.benchmark} --settings {params.settings:q}"
        " --test-file {input.test} --decode-spec {params.decode:q} --speed-spec {params.speed:q}"
        " --runtime {params.runtime:q} --out {output} > {log} 2>&1"
