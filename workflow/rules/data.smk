localrules:
    benchmark,


rule data:
    output:
        directory(f"{RUN}/data"),
    params:
        spec=arg(section("data")),
    log:
        f"{RUN}/logs/data.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core data --spec {params.spec:q} --out {output} > {log} 2>&1"


rule benchmark:
    output:
        f"{RUN}/benchmarks/{{benchmark}}_test.jsonl",
    params:
        settings=lambda wc: arg(BENCHMARKS[wc.benchmark]),
        out=lambda wc, output: Path(output[0]).parent,
    log:
        f"{RUN}/logs/benchmark/{{benchmark}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core benchmark --name {wildcards.benchmark} --settings {params.settings:q} --out {params.out}"
        " > {log} 2>&1"
