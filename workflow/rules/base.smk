rule base:
    input:
        data=f"{RUN}/data",
    output:
        directory(f"{RUN}/models/{{model}}/base"),
    params:
        spec=lambda wc: arg(config["models"][wc.model]),
        checkpoints=lambda wc: f"{RUN}/checkpoints/{wc.model}/base",
    threads: RUNTIME.threads
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/base/{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} base --model-spec {params.spec:q} --data {input.data}"
        " --out {output} --checkpoints {params.checkpoints} > {log} 2>&1"
