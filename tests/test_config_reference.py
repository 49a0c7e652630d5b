"""config/README.md lists every config key with its type, default and meaning: generated from the workflow's schema and
the typed settings that hold the defaults (scripts/config_reference.py), and checked here against both."""

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import yaml

from sbd_core.benchmarks import describe_benchmarks
from sbd_core.likelihood import TASKS
from sbd_core.samplers import describe_samplers

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def load_generator():
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_readme_is_the_generated_reference():
    generated = load_generator().render()
    assert (ROOT / "config" / "README.md").read_text() == generated, (
        "config/README.md is out of date with workflow/schemas/config.schema.yaml or the settings' defaults: "
        "regenerate it with `python scripts/config_reference.py`")


def test_reference_gives_the_typed_settings_defaults():
    text = (ROOT / "config" / "README.md").read_text()
    assert "| `decode.block_size` | integer >= 1 | `16` |" in text  # DecodeConfig.block_size
    assert "| `runtime.decode_threads` | integer >= 1 or null | `null` |" in text  # RuntimeSettings
    assert "| `finetune.max_steps` | integer >= 1 | required |" in text
    assert "| `models.<name>.repo_id` | string | required (source: hub) |" in text
    assert "| `max_new_tokens` | `32768` | `32768` | `32768` | `1024` |" in text  # per benchmark, registry order


def property_names(node: dict) -> set[str]:
    return set(node["properties"])


@pytest.mark.parametrize("documented, registered", [
    (lambda: property_names(SCHEMA["properties"]["benchmarks"]["additionalProperties"]),
     lambda: {key for info in describe_benchmarks().values() for key in info["defaults"]}),
    (lambda: property_names(SCHEMA["properties"]["likelihood"]["properties"]["tasks"]["additionalProperties"]),
     lambda: {f.name for task in TASKS.values() for f in dataclasses.fields(task.defaults)}),
    (lambda: property_names(SCHEMA["properties"]["decode"]["properties"]["samplers"]["items"]) - {"solver"},
     lambda: {key for info in describe_samplers().values() for key in info["params"]}),
], ids=["benchmark settings", "likelihood task settings", "sampler parameters"])
def test_schema_documents_exactly_the_registries_keys(documented, registered):
    """A setting a registry accepts has a typed, described entry in the schema, and the schema names no other."""
    assert documented() == registered()


def test_a_key_without_a_description_stops_the_generator(tmp_path, monkeypatch):
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    del schema["properties"]["runtime"]["properties"]["threads"]["description"]
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(schema))
    generator = load_generator()
    monkeypatch.setattr(generator, "SCHEMA_FILE", path)
    with pytest.raises(SystemExit, match=r"runtime\.threads has no description"):
        generator.render()
