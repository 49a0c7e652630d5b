rule data:
    output:
        directory(f"{RUN}/data"),
    params:
        spec=arg({**section("data"), "tasks": TASKS, **({"seed": config["seed"]} if "seed" in config else {})}),
    log:
        f"{RUN}/logs/data.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core data --spec {params.spec:q} --out {output} > {log} 2>&1"
