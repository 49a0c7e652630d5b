rule data:
    output:
        directory(f"{RUN}/data"),
    params:
        tasks=" ".join(TASKS),
        train=per_task_arg(config["data"]["train_per_task"]),
        valid=config["data"]["valid_per_task"],
        test=config["data"]["test_per_task"],
        seed=config["seed"],
    log:
        f"{RUN}/logs/data.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core data --tasks {params.tasks} --train-per-task {params.train}"
        " --valid-per-task {params.valid} --test-per-task {params.test} --seed {params.seed} --out {output} > {log} 2>&1"
