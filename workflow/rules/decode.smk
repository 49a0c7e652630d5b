rule decode:
    input:
        model=f"{RUN}/models/{{model}}/{{objective}}",
        data=f"{RUN}/data",
    output:
        generations=f"{RUN}/generations/{{model}}/{{objective}}/{{sampler}}/{{task}}.jsonl",
        provenance=f"{RUN}/generations/{{model}}/{{objective}}/{{sampler}}/{{task}}.jsonl.provenance.json",
    params:
        sampler=lambda wc: arg(SAMPLERS[wc.sampler]),
        decode=arg(section("decode", drop=("samplers",))),
        runtime=arg({"device": RUNTIME.device, "dtype": RUNTIME.dtype}),
    threads: 1
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/decode/{{model}}/{{objective}}/{{sampler}}/{{task}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} decode --model {input.model} --task {wildcards.task}"
        " --data {input.data} --sampler {wildcards.sampler} --sampler-spec {params.sampler:q}"
        " --decode-spec {params.decode:q} --runtime {params.runtime:q} --out {output.generations} > {log} 2>&1"
