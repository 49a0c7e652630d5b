# One fine-tune per (model, objective), always through the torchrun launcher (sbd_core.launch): one CPU process in the
# embedded default, finetune.processes_per_node GPUs on finetune.nodes nodes at scale. A job killed by a time limit is
# resubmitted finetune.resubmit times and resumes from its newest checkpoint.
rule finetune:
    input:
        base=f"{RUN}/models/{{model}}/base",
        data=f"{RUN}/packed/{{model}}",
    output:
        directory(f"{RUN}/models/{{model}}/{{objective}}"),
    params:
        spec=arg(FINETUNE_SPEC),
        runtime=arg({"device": RUNTIME.device}),
        checkpoints=lambda wc: f"{RUN}/checkpoints/{wc.model}/{wc.objective}",
        nodes=LAUNCH.nodes,
        processes=LAUNCH.processes_per_node,
    threads: FINETUNE_THREADS
    resources:
        **finetune_resources(),
    retries: LAUNCH.resubmit
    log:
        f"{RUN}/logs/finetune/{{model}}/{{objective}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} finetune --base {input.base} --data {input.data}"
        " --objective {wildcards.objective} --spec {params.spec:q} --runtime {params.runtime:q}"
        " --nodes {params.nodes} --processes {params.processes} --out {output} --checkpoints {params.checkpoints}"
        " > {log} 2>&1"
