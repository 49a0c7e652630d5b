"""benchmarks/bench_decode.py end to end on a tiny random model: every decoder's row, the token checks, the ratios and
the phase split are in the last line's JSON document. Structure and forward counts only: timings are not asserted,
and tokens of two code paths on a random model are reported by the benchmark, never compared here."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # about 7 s: every decoder of the benchmark on a tiny model
def test_bench_decode_reports_every_decoder_with_its_forwards_and_time_split(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_decode.py"), "--batch", "2", "--prompts", "3",
           "--prompt-lengths", "5", "9", "--max-new-tokens", "6", "--block-size", "3", "--gamma", "inf",
           "--repeats", "1", "--threads", "1", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc == json.loads(out.read_text())
    rows = {(r["decoder"], r["mode"], r["gamma"]): r for r in doc["rows"]}
    assert set(rows) == {("generate", "ntp", None), ("generate-static", "ntp", None), ("reference", "ntp", None),
                         ("engine", "ntp", None), ("reference", "sbd", "inf"), ("engine", "sbd", "inf")}
    assert all(r["tokens"] == 3 * 6 and r["batch"] == 2 and r["tok_per_s"] > 0 for r in rows.values())
    # NTP: one token per row forward; generate's prefill gives the first token, so two batches save one forward each
    assert rows["engine", "ntp", None]["forwards"] == rows["reference", "ntp", None]["forwards"] == 6 + 6
    assert rows["generate", "ntp", None]["forwards"] == 2 * (6 - 1)
    # gamma inf fills a block of 3 per forward: 2 blocks per row; the engine runs both rows of a batch per forward
    assert rows["engine", "sbd", "inf"]["tok_per_fwd"] == rows["reference", "sbd", "inf"]["tok_per_fwd"] == 3.0
    for row in rows.values():  # the eager instrumented run's split: the phases add up to its ms per forward
        phases = [row[f"{p}_ms"] for p in ("model", "prefill", "solver", "state", "host")]
        assert row["model_ms"] > 0 and abs(sum(phases) - row["instrumented_ms_per_fwd"]) <= 1e-3 * sum(map(abs, phases))
    assert {c["check"] for c in doc["checks"]} == {"engine == reference", "engine == generate",
                                                  "engine == generate-static"}
    assert all(c["rows"] == 3 for c in doc["checks"])
    assert {r["decoder"] for r in doc["ratios"]["sbd_over_ntp"]} == {"reference", "engine"}
    assert doc["ratios"]["sbd_over_ntp"][0]["nfe_speedup"] == 3.0
    assert len(doc["ratios"]["engine_ntp_over_generate"]) == 2 and len(doc["ratios"]["engine_over_reference"]) == 2
