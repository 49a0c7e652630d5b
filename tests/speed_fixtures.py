"""Hand-made speed files (the speed stage's format, sbd_core.pipeline.speed) for the report's tests."""

from __future__ import annotations

import json
from pathlib import Path

from sbd_core.samplers import sampler_spec

CONTROL = ("ntp", "ntp (A/A)")


def speed_doc(model: str, benchmark: str, walls: dict, specs: dict | None = None, rounds: int = 3, batch: int = 8,
              jitter=(1.0,), latency: dict | None = None, widths: dict | None = None, steps: int = 0) -> dict:
    """A speed file whose row ``(objective, sampler)`` decodes in ``walls[row]`` seconds at ``batch`` (a number, or a
    list: one per round; ``latency[row]`` at batch 1, default the same) times ``jitter[r % len(jitter)]`` in round r
    (one factor for every row of a round: a machine that slows down as a whole); the A/A control repeats the NTP arm. ``specs``: sampler -> spec (default
    NTP decoding); ``widths``: per row the tokens fed per forward of its one problem (default one forward of one token)."""
    rows, runs = [], []
    keys = list(walls) + [CONTROL]
    for objective, sampler in keys:
        control = (objective, sampler) == CONTROL
        tag = "ntp" if control else sampler
        spec = (specs or {}).get(tag, sampler_spec("ntp"))
        fed = (widths or {}).get((objective, sampler), {1: 1})
        rows.append({"name": f"{objective}/{sampler}", "arm": objective, "objective": objective, "train_seed": 0,
                     "train_steps": steps, "sampler": tag, "mode": spec["mode"], "sampler_spec": spec,
                     "control": control, "reference": "ntp/ntp", "block_size": 4, "batch_size": batch,
                     "checked": True, "widths_source": "recorded",
                     "problems": [{"id": "p0", "prompt_tokens": 10, "num_tokens": 100, "nfe": sum(fed.values()),
                                   "widths": {str(w): n for w, n in fed.items()}}]})
    for r in range(rounds):
        for position, key in enumerate(keys):
            wall = walls[("ntp", "ntp") if key == CONTROL else key]
            for b, seconds in ((1, (latency or {}).get(key, wall)), (batch, wall)):
                seconds = seconds[r] if isinstance(seconds, list) else seconds
                runs.append({"round": r, "position": position, "row": f"{key[0]}/{key[1]}", "batch": b,
                             "wall_s": seconds * jitter[r % len(jitter)], "prefill_s": 0.0})
    return {"kind": "sbd_speed", "version": 1, "model": model, "benchmark": benchmark, "device": "cpu",
            "device_name": "test cpu", "dtype": "float32", "threads": 1,
            "settings": {"problems": 1, "rounds": rounds, "warmup": 0, "seed": 0, "batch": batch},
            "problem_ids": ["p0"], "rows": rows, "runs": runs}


def write_speed(root: Path, doc: dict) -> Path:
    path = root / "speed" / doc["model"] / f"{doc['benchmark']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path
