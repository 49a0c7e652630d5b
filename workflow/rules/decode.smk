def decode_spec():
    return {k: v for k, v in config["decode"].items() if k != "samplers"}


rule decode:
    input:
        model=f"{RUN}/models/{{model}}/{{objective}}",
        data=f"{RUN}/data",
    output:
        generations=f"{RUN}/generations/{{model}}/{{objective}}/{{sampler}}/{{task}}.jsonl",
        provenance=f"{RUN}/generations/{{model}}/{{objective}}/{{sampler}}/{{task}}.jsonl.provenance.json",
    params:
        sampler=lambda wc: arg(SAMPLERS[wc.sampler]),
        decode=arg(decode_spec()),
        runtime=arg({"device": RUNTIME["device"], "dtype": RUNTIME["dtype"]}),
    threads: 1
    resources:
        gpu=GPU,
    log:
        f"{RUN}/logs/decode/{{model}}/{{objective}}/{{sampler}}/{{task}}.log",
    shell:
        "{PY} -m sbd_core --threads {threads} decode --model {input.model} --task {wildcards.task}"
        " --data {input.data} --sampler {wildcards.sampler} --sampler-spec {params.sampler:q}"
        " --decode-spec {params.decode:q} --runtime {params.runtime:q} --out {output.generations} > {log} 2>&1"
