# One fine-tune per (model, objective, seed), always through the torchrun launcher (sbd_core.launch): one CPU process in
# the embedded default, finetune.processes_per_node GPUs on finetune.nodes nodes at scale. A job killed by a time limit
# is resubmitted finetune.resubmit times and resumes from its newest checkpoint. Besides its final model it keeps the
# model after each of finetune.eval_at_steps as a folder of its own (<arm>-step<K>), decoded like a final model.
rule finetune:
    input:
        base=f"{RUN}/models/{{model}}/base",
        data=f"{RUN}/packed/{{model}}",
    output:
        model=directory(f"{RUN}/models/{{model}}/{{arm}}"),
        exports=[directory(f"{RUN}/models/{{model}}/{{arm}}-step{k}") for k in EVAL_STEPS],
    params:
        objective=lambda wc: ARMS[wc.arm].objective,
        spec=lambda wc: arg(trainer_spec(ARMS[wc.arm], FINETUNE_SPEC)),
        exports=lambda wc: arg(export_dirs(wc)),
        runtime=arg({"device": RUNTIME.device}),
        checkpoints=lambda wc: f"{RUN}/checkpoints/{wc.model}/{wc.arm}",
        nodes=LAUNCH.nodes,
        processes=LAUNCH.processes_per_node,
    wildcard_constraints:
        arm="|".join(re.escape(name) for name in TRAINED),
    threads: FINETUNE_THREADS
    resources:
        **finetune_resources(),
    retries: LAUNCH.resubmit
    log:
        f"{RUN}/logs/finetune/{{model}}/{{arm}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} finetune --base {input.base} --data {input.data}"
        " --objective {params.objective} --spec {params.spec:q} --runtime {params.runtime:q}"
        " --nodes {params.nodes} --processes {params.processes} --out {output.model}"
        " --checkpoints {params.checkpoints} --exports {params.exports:q} > {log} 2>&1"
