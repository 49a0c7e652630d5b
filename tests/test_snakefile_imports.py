"""Parsing the workflow loads no torch: the modules and names the Snakefile and its rule files import at parse time are
torch-free (the tensor code is imported by the jobs, ``python -m sbd_core <stage>``), so ``snakemake -n`` stays quick.

The imports are read from the files themselves (their top-level ``import`` / ``from ... import`` lines, which Snakemake
runs while it parses), so this test follows the rules as they change.
"""

import os
import re
import subprocess
import sys

from snakemake_runs import ROOT

WORKFLOW_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
# a top-level import statement: `import a, b.c`, `from a.b import x, y` or `from a.b import (x,\n y)`
IMPORT = re.compile(r"^(?:import [\w., ]+|from [\w.]+ import (?:\([^)]*\)|[\w, ]+))$", re.M)


def parse_time_imports() -> list[str]:
    """Every top-level import statement of the Snakefile and workflow/rules/*.smk, as written, in file order."""
    return [m.group(0) for path in WORKFLOW_FILES for m in IMPORT.finditer(path.read_text())]


def loads_torch(code: str) -> bool:
    """Whether ``code``, run in a fresh interpreter, leaves torch in ``sys.modules``."""
    script = f"import sys\n{code}\nprint('torch' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1] == "True"


def test_the_imports_are_found():
    """The regex sees the rules' imports (so the tests below are not vacuous)."""
    imports = parse_time_imports()
    modules = {re.match(r"(?:from|import) ([\w.]+)", statement).group(1) for statement in imports}
    assert {"sbd_core.samplers", "sbd_core.pipeline.arms", "sbd_core.pipeline.plan", "sbd_core.decode_config",
            "sbd_core.likelihood"} <= modules, modules
    assert all(statement in "\n".join(path.read_text() for path in WORKFLOW_FILES) for statement in imports)


def test_the_workflows_imports_load_no_torch():
    imports = parse_time_imports()
    assert not loads_torch("\n".join(imports)), "one of these imports loads torch:\n" + "\n".join(imports)


def test_each_sbd_core_import_loads_no_torch():
    """One fresh interpreter per sbd_core import, so a failure names the module (not only the first to pull it in)."""
    loading = [statement for statement in parse_time_imports() if re.match(r"(?:from|import) sbd_core\b", statement)
               and loads_torch(statement)]
    assert not loading, f"these workflow imports load torch: {loading}"


def test_a_dry_run_of_the_default_config_loads_no_torch(tmp_path):
    """``snakemake -n`` on the default config (config/config.yaml) succeeds and never imports torch."""
    argv = ["snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "-n", "--cores", "1"]
    code = ("import atexit\n"
            "atexit.register(lambda: print('torch loaded:', 'torch' in sys.modules))\n"
            f"sys.argv = {argv!r}\n"
            "from snakemake.cli import main\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert "This was a dry-run" in out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "torch loaded: False", out.stdout[-3000:]
