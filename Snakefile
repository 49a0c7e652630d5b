# Set Block Decoding reproduction: base -> finetune (ntp, sbd) -> decode (samplers) -> score -> report.
# Default config: the embedded offline CPU run. Paper scale: --configfile config/paper.yaml --profile workflow/profiles/slurm
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/base.smk"
include: "workflow/rules/finetune.smk"
include: "workflow/rules/decode.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        REPORT_FILES,
    default_target: True
