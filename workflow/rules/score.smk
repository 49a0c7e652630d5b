rule score:
    input:
        generations=f"{RUN}/generations/{{model}}/{{objective}}/{{sampler}}/{{task}}.jsonl",
        provenance=f"{RUN}/generations/{{model}}/{{objective}}/{{sampler}}/{{task}}.jsonl.provenance.json",
        data=f"{RUN}/data",
    output:
        f"{RUN}/scores/{{model}}/{{objective}}/{{sampler}}/{{task}}.json",
    params:
        names=lambda wc: arg({"model": wc.model, "objective": wc.objective, "sampler": wc.sampler}),
        code=arg(section("score").get("code", {})),
        work=lambda wc: f"{RUN}/tmp/score/{wc.model}/{wc.objective}/{wc.sampler}/{wc.task}",
    threads: 1
    log:
        f"{RUN}/logs/score/{{model}}/{{objective}}/{{sampler}}/{{task}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core score --task {wildcards.task} --data {input.data} --generations {input.generations}"
        " --names {params.names:q} --code-settings {params.code:q} --work-dir {params.work}"
        " --out {output} > {log} 2>&1"
