rule score:
    input:
        generations=f"{RUN}/generations/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.jsonl",
        provenance=f"{RUN}/generations/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.jsonl.provenance.json",
        test=f"{RUN}/benchmarks/{{benchmark}}_test.jsonl",
    output:
        f"{RUN}/scores/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.json",
    params:
        settings=lambda wc: arg(BENCHMARKS[wc.benchmark]),
        names=lambda wc: arg(score_names(wc)),
        work=lambda wc: f"{RUN}/tmp/score/{wc.model}/{wc.arm}/{wc.sampler}/{wc.benchmark}",
    threads: 1
    log:
        f"{RUN}/logs/score/{{model}}/{{arm}}/{{sampler}}/{{benchmark}}.log",
    conda:
        CONDA_ENV
    shell:
        "mkdir -p {params.work} && python -m sbd_core score --benchmark {wildcards.benchmark} --generations"
        " {input.generations} --data {input.test} --settings {params.settings:q} --names {params.names:q}"
        " --work-dir {params.work} --out {output} > {log} 2>&1"
