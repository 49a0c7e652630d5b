rule finetune:
    input:
        base=f"{RUN}/models/{{model}}/base",
        data=f"{RUN}/data",
    output:
        directory(f"{RUN}/models/{{model}}/{{objective}}"),
    params:
        spec=arg(section("finetune", drop=("objectives",))),
        runtime=arg({"device": RUNTIME.device, "dtype": RUNTIME.dtype}),
        checkpoints=lambda wc: f"{RUN}/checkpoints/{wc.model}/{wc.objective}",
    threads: max(1, RUNTIME.threads // len(OBJECTIVES))  # the arms train side by side
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/finetune/{{model}}/{{objective}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} finetune --base {input.base} --data {input.data}"
        " --objective {wildcards.objective} --spec {params.spec:q} --runtime {params.runtime:q}"
        " --out {output} --checkpoints {params.checkpoints} > {log} 2>&1"
