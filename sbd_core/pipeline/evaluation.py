"""The evaluation stages that read and write files only: benchmark (a benchmark's test problems) and score (the
benchmark's verdict on stored generations); the decode stage between them is :mod:`.decode`.

Every benchmark is reached through :mod:`sbd_core.benchmarks` only (its settings, prompt, generation limits and scorer),
so adding one touches its module and a config entry, nothing here. Torch-free, so a benchmark or score job (a DAG runs
one score job per decode) does not pay torch's start-up.

The score stage writes one JSON object (:mod:`sbd_core.records.score`'s format): the benchmark's metrics, the NFE and
token totals the report derives NFE speedups from, the sampler spec, the recipe and the per-problem verdicts, each with
its problem's ``nfe`` and ``num_tokens`` (the report's intervals resample problems), the digest of its tokens
(``tokens_sha``: the report checks verified runs against NTP mode with it) and a verified run's ``accepted`` /
``drafted`` lengths.
"""

from __future__ import annotations

from pathlib import Path

from .. import benchmarks
from ..io_utils import write_json_atomic
from ..provenance import provenance
from ..records.generations import decode_settings, read_records
from ..records.score import add_decode_cost, write_score


def run_benchmark(name: str, settings: dict | None, out_dir: Path) -> Path:
    """Write benchmark ``name``'s test problems (download, local file or generation) into ``out_dir``."""
    bench = benchmarks.get_benchmark(name)
    return bench.fetch(bench.settings(settings), out_dir)


def score_generations(benchmark: str, generations: Path, data: Path | None = None, settings: dict | None = None,
                      work_dir: Path | None = None) -> dict:
    """The benchmark's verdict on a generations file (``{"id", "completion"}`` per line), plus what the decode stage
    recorded about its cost when the file came from it (``nfe`` in the records, a provenance sidecar beside it).

    ``data`` is the test file the generations answer (the benchmark stage's output, or a file in the source dataset's
    own schema); without it the benchmark's own test set is fetched.
    """
    result = benchmarks.score_generations(benchmark, generations, data=data, settings=settings, work_dir=work_dir)
    return add_decode_cost(result, read_records(generations), decode_settings(generations))


def run_score(benchmark: str, generations: Path, out_path: Path, data: Path | None = None,
              settings: dict | None = None, names: dict | None = None, work_dir: Path | None = None) -> dict:
    """Score stored generations (never decodes again) and write the result, with ``names`` (model, objective,
    sampler) when the DAG runs it; print one summary line. A benchmark's ``sidecars`` (``{name: JSON content}``,
    e.g. LiveCodeBench's ``eval_all.json``) are written beside it as ``<out stem>_<name>``, their paths recorded."""
    result = {**(names or {}), **score_generations(benchmark, generations, data, settings, work_dir)}
    result["provenance"] = provenance("score", {"generations": str(generations), "data": str(data), **(names or {})})
    sidecars = result.pop("sidecars", None)
    if sidecars:
        result["sidecars"] = {name: str(Path(out_path).with_name(f"{Path(out_path).stem}_{name}")) for name in sidecars}
        for name, content in sidecars.items():
            write_json_atomic(content, Path(result["sidecars"][name]))
    write_score(result, out_path)
    metrics = ", ".join(f"{k} {v:.4f}" for k, v in result["metrics"].items() if isinstance(v, float))
    print(f"{benchmark}: accuracy {result['accuracy']:.4f} on {result['n']} problems ({metrics})")
    return result
