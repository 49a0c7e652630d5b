# The config, checked before the steps are read: the schema (config/README.md lists every key), a partial --configfile
# (how to stack it on the default), and local models that another run makes. Each mistake is one line on stderr.
import sys
from pathlib import Path

import jsonschema
import yaml
from snakemake_interface_executor_plugins.settings import DeploymentMethod

SCHEMA_FILE = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_FILE.read_text())


def config_error(message):
    """Stop before any job with one line (a WorkflowError would add its file, line and a frame)."""
    sys.exit(f"config error: {message}")


def shown(path):
    """A config file as the user would type it: relative to the working directory where it lies below it."""
    path = Path(path).resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def check_complete(config, files):
    """A --configfile replaces config/config.yaml: one that holds only a few keys is a file meant to be stacked."""
    missing = [key for key in SCHEMA["required"] if key not in config]
    if missing and files:
        names = " ".join(shown(f) for f in files)
        config_error(f"{names} lacks {', '.join(missing)}: a --configfile replaces config/config.yaml; to change a few "
                     f"keys of the default, stack your file on it: snakemake --configfile config/config.yaml {names}")


def check_schema(config):
    """jsonschema's most relevant error as one line naming the key (Snakemake's validate prints the whole schema)."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(config))
    if error is not None:
        key = ".".join(str(part) for part in error.absolute_path) or "(top level)"
        config_error(f"{key}: {error.message} (every key: config/README.md)")


def run_configs():
    """{run name: the shipped config file that writes results/<run>/}."""
    configs = {}
    for path in sorted((Path(workflow.basedir) / "config").glob("*.yaml")):
        run = (yaml.safe_load(path.read_text()) or {}).get("run")
        configs.setdefault(run, path.relative_to(workflow.basedir))
    return configs


def check_local_models(models):
    """A model read from a local path must be there before the DAG is planned; where it is another run's output
    (results/<run>/...), say which config makes it."""
    for name, spec in models.items():
        path = spec.get("path")
        if spec["source"] not in ("local", "gguf") or path is None or Path(path).exists():
            continue
        parts = Path(path).parts
        made_by = run_configs().get(parts[1]) if len(parts) > 2 and parts[0] == "results" else None
        if made_by is None:
            config_error(f"models.{name}.path: {path} does not exist (expected a checkpoint folder, or a .gguf file "
                         "for source: gguf)")
        config_error(f"models.{name}.path: {path} does not exist yet: it is made by the run '{parts[1]}' "
                     f"({made_by}); run that first: snakemake --cores all --configfile {made_by}")


def check_deployment():
    """--use-conda is refused: environment.yml installs this checkout and requirements/ci.txt by paths relative to the
    repository, and Snakemake builds a rule's environment from a copy of the file elsewhere (untested: no conda)."""
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
        config_error("--use-conda is not supported: run snakemake from the environment of scripts/setup.sh or of "
                     "`conda env create -f environment.yml` (docs/install.md)")


check_deployment()
check_complete(config, workflow.overwrite_configfiles)
check_schema(config)
check_local_models(config["models"])
