# The base checkpoint of each model: fetched from the hub, a local folder or a GGUF file (a download: local job), or,
# for source: scratch, a tiny model pretrained here on the synthetic tasks.
localrules:
    fetch_base,


rule fetch_base:
    output:
        directory(f"{RUN}/models/{{model}}/base"),
    params:
        spec=lambda wc: arg(config["models"][wc.model]),
    wildcard_constraints:
        model=models_from(("hub", "local", "gguf")),
    log:
        f"{RUN}/logs/base/{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core base --model-spec {params.spec:q} --out {output} > {log} 2>&1"


rule pretrain_base:
    input:
        data=[f"{DATA_DIR}/{name}" for name in SYNTHETIC_SOURCES],
    output:
        directory(f"{RUN}/models/{{model}}/base"),
    params:
        spec=lambda wc: arg(config["models"][wc.model]),
        checkpoints=lambda wc: f"{RUN}/checkpoints/{wc.model}/base",
        data=lambda wc, input: Path(input.data[0]).parent,
    wildcard_constraints:
        model=models_from(("scratch",)),
    threads: RUNTIME.threads
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/base/{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} base --model-spec {params.spec:q} --data {params.data}"
        " --out {output} --checkpoints {params.checkpoints} > {log} 2>&1"
