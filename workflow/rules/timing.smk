# time(k): the fast engine's step latencies on this run's hardware, one job per model, in rounds like the speed stage
# and alone on the machine like it (every core claimed); the report predicts every run's wall speedup from it (eq. 16).
rule timing:
    input:
        model=f"{RUN}/models/{{model}}/{TIMING_ARM}",
    output:
        f"{RUN}/timing/{{model}}.json",
    params:
        batches=" ".join(str(b) for b in TIMING_BATCHES),
        widths=" ".join(str(w) for w in TIMING.widths),
        kv_lens=" ".join(str(n) for n in TIMING.kv_lens),
        block=DECODE_BLOCK_SIZE,
        threads=RUNTIME.threads,
    threads: TIMED_THREADS
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/timing/{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {params.threads} --no-progress timing --model {input.model}"
        f" --device {RUNTIME.device} --dtype {RUNTIME.dtype}"
        " --batch {params.batches} --width {params.widths} --block-size {params.block} --kv-len {params.kv_lens}"
        f" --warmup {TIMING.warmup} --repeats {TIMING.repeats} --rounds {TIMING.rounds} --seed {TIMING.seed}"
        " --out {output} > {log} 2>&1"
