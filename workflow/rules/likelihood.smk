# The likelihood stage (the paper's Table 2): one data job per task (a local job: downloads run where the workflow is
# started), then one job per (model, trained arm, task) scoring lm-eval's task with the sbd model's NTP log-likelihoods.
# Config: likelihood: {tasks: {<name>: {settings}}} (names and settings: sbd_core.likelihood); no section or
# enabled: false, no jobs.
from sbd_core.likelihood import SCORING_ONLY, planned_tasks

LIKELIHOOD_TASKS = _checked(planned_tasks, config.get("likelihood"))
LIKELIHOOD_FILES = [
    f"{RUN}/likelihood/{m}/{a}/{t}.json" for m in MODELS for a in TRAINED for t in LIKELIHOOD_TASKS
]
TABLE2_FILES = [f"{REPORT_DIR}/{name}" for name in TABLE2] if LIKELIHOOD_FILES else []
# On the CPU a scoring job takes one core (it is not timed), so it runs beside a fine-tune instead of waiting for a
# machine of its own; on GPUs it has a device of its own.
LIKELIHOOD_THREADS = 1 if RUNTIME.gpus == 0 else RUNTIME.threads


localrules:
    likelihood_data,


# the data job sees only the settings that decide the data (a new metric or batch size must not download again)
rule likelihood_data:
    output:
        directory(f"{RUN}/likelihood_data/{{likelihood_task}}"),
    params:
        settings=lambda wc: arg(
            {k: v for k, v in LIKELIHOOD_TASKS[wc.likelihood_task].items() if k not in SCORING_ONLY}
        ),
    log:
        f"{RUN}/logs/likelihood_data/{{likelihood_task}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core likelihood-data --task {wildcards.likelihood_task} --settings {params.settings:q}"
        " --out {output} > {log} 2>&1"


rule likelihood:
    input:
        model=f"{RUN}/models/{{model}}/{{arm}}",
        data=f"{RUN}/likelihood_data/{{likelihood_task}}",
    output:
        f"{RUN}/likelihood/{{model}}/{{arm}}/{{likelihood_task}}.json",
    params:
        settings=lambda wc: arg(LIKELIHOOD_TASKS[wc.likelihood_task]),
        names=lambda wc: arg({"model": wc.model, "objective": wc.arm}),  # the arm (objective and seed) is Table 2's row
        runtime=arg({"device": RUNTIME.device, "dtype": RUNTIME.dtype}),
    threads: LIKELIHOOD_THREADS
    resources:
        gpu=RUNTIME.gpus,
    log:
        f"{RUN}/logs/likelihood/{{model}}/{{arm}}/{{likelihood_task}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core --threads {threads} likelihood --model {input.model} --task {wildcards.likelihood_task}"
        " --settings {params.settings:q} --data {input.data} --runtime {params.runtime:q} --names {params.names:q}"
        " --out {output} > {log} 2>&1"


wildcard_constraints:
    likelihood_task="|".join(LIKELIHOOD_TASKS) or "(?!)",
