# Downloads run where the workflow is started (localrules: on a cluster, the login node, which has internet).
localrules:
    data,
    benchmark,


# one job per training source: download (hub), generate (synthetic tasks) or check a local copy (path)
rule data:
    output:
        directory(f"{DATA_DIR}/{{source}}"),
    params:
        spec=lambda wc: arg(FETCH_SPECS[wc.source]),
        out=lambda wc, output: Path(output[0]).parent,
    wildcard_constraints:
        source="|".join(FETCH_SPECS),
    log:
        f"{RUN}/logs/data/{{source}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core data --spec {params.spec:q} --out {params.out} > {log} 2>&1"


rule pack:
    input:
        data=[f"{DATA_DIR}/{name}" for name in FETCH_SPECS],
        base=f"{RUN}/models/{{model}}/base",
    output:
        directory(f"{RUN}/packed/{{model}}"),
    params:
        spec=arg(PACK_SPEC),
        data=lambda wc, input: Path(input.data[0]).parent,
    threads: PACK_SPEC.get("num_proc", 1)  # the tokenizer processes
    resources:
        gpu=0,
    log:
        f"{RUN}/logs/pack/{{model}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} pack --spec {params.spec:q} --base {input.base} --data {params.data}"
        " --out {output} > {log} 2>&1"


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
