# Set Block Decoding reproduction: data -> base -> finetune (objectives) -> decode (samplers) -> score -> report;
# decode -> speed (wall-clock of every decode run, alone on the machine) -> report; timing (time(k)) -> report;
# likelihood (Table 2: each arm on lm-eval's likelihood tasks) -> report.
#   snakemake --cores all                                   the embedded default (config/config.yaml): offline, CPU
#   snakemake --configfile config/paper.yaml --profile profiles/slurm               paper scale
# A --configfile REPLACES the default config: a profile means exactly what its file says (nothing is merged from
# config/config.yaml). To change a few keys, stack a small file on the default (later files win, key by key):
#   snakemake --configfile config/config.yaml my.yaml
# --config key=value still overrides single keys on top. profiles/default (cores: all) is found by snakemake itself.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


if not workflow.overwrite_configfiles:

    configfile: Path(workflow.basedir) / "config" / "config.yaml"


include: "workflow/rules/config.smk"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/base.smk"
include: "workflow/rules/finetune.smk"
include: "workflow/rules/decode.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/timing.smk"
include: "workflow/rules/speed.smk"
include: "workflow/rules/likelihood.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        REPORT_FILES,
        TABLE2_FILES,
    default_target: True
