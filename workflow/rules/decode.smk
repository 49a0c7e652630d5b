rule decode:
    input:
        model=f"{RUN}/models/{{model}}/{{arm}}",
        test=f"{RUN}/benchmarks/{{benchmark}}_test.jsonl",
    output:
        generations=f"{RUN}/generations/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.jsonl",
        provenance=f"{RUN}/generations/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.jsonl.provenance.json",
    params:
        settings=lambda wc: arg(BENCHMARKS[wc.benchmark]),
        sampler=lambda wc: arg(SAMPLERS[wc.sampler]),
        decode=arg(section("decode", drop=("samplers", "restrict"))),
        runtime=arg({"device": RUNTIME.device, "dtype": RUNTIME.dtype}),
        threads=RUNTIME.threads,
    threads: DECODE_THREADS
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/decode/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {params.threads} decode --model {input.model} --benchmark {wildcards.benchmark}"
        " --settings {params.settings:q} --test-file {input.test} --sampler-spec {params.sampler:q}"
        " --decode-spec {params.decode:q} --runtime {params.runtime:q} --out {output.generations} > {log} 2>&1"
