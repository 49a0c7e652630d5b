"""The hardware a provenance record names: the CPU generation and, where torch is loaded, its CPU kernels."""

import json
import platform

import torch

from sbd_core.provenance import cpu_model, hardware, model_recipe

TWO_CPUS = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu avx2 avx512f

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: another name
stepping\t: 0
"""


def test_cpu_model_reads_the_first_processor_with_its_generation_numbers(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(TWO_CPUS)
    # the numbers tell apart what a virtual machine names alike (family 25 model 17 and model 1: two EPYC generations)
    assert cpu_model(path) == "AMD EPYC (cpu family 25, model 17, stepping 1)"
    path.write_text("processor\t: 0\nmodel name\t: Some CPU\n")
    assert cpu_model(path) == "Some CPU"


def test_cpu_model_falls_back_to_platform_without_a_model_name(tmp_path, monkeypatch):
    monkeypatch.setattr(platform, "processor", lambda: "aarch64")
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nCPU implementer\t: 0x41\n")  # an Arm cpuinfo has no model name
    assert cpu_model(path) == "aarch64"
    assert cpu_model(tmp_path / "absent") == "aarch64"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert cpu_model(tmp_path / "absent") is None


def test_hardware_names_the_cpu_kernels_where_torch_is_loaded():
    info = hardware()  # torch is imported by this module
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and info["cpu_capability"]
    assert info["torch_threads"] == torch.get_num_threads() and info["cpu"] == cpu_model()


def test_model_recipe_names_where_the_model_was_trained(tmp_path):
    """The decode stage copies a model's recipe into its records: the objective, the departures and the CPU, torch
    kernels and GPU its fine-tune ran on (read by the report); a model without them records none."""
    (tmp_path / "provenance.json").write_text(json.dumps({
        "settings": {"objective": "sbd", "departures": {"matp_shift": "revealed"}, "data": "d"},
        "hardware": {"cpu": "AMD EPYC (cpu family 25, model 17, stepping 1)", "cpu_capability": "AVX2",
                     "cuda": False, "cpu_count": 2}}))
    assert model_recipe(tmp_path) == {
        "objective": "sbd", "departures": {"matp_shift": "revealed"},
        "trained_on": {"cpu": "AMD EPYC (cpu family 25, model 17, stepping 1)", "cpu_capability": "AVX2"}}
    (tmp_path / "provenance.json").write_text(json.dumps({"settings": {"objective": "ntp"}}))
    assert model_recipe(tmp_path) == {"objective": "ntp"}
    assert model_recipe(tmp_path / "absent") == {}
