"""bench_decode.py's token checks, ratios and tables (a benchmark's checks: printed, never asserted)."""

from __future__ import annotations

import math

PEERS = ("generate", "generate-static")
COLUMNS = [("decoder", "{:<15}"), ("label", "{:<12}"), ("batch", "{:>5}"), ("compiled", "{!s:>8}"),
           ("tok_per_s", "{:>9.1f}"), ("fwd_per_s", "{:>9.1f}"), ("ms_per_fwd", "{:>9.2f}"),
           ("tok_per_fwd", "{:>8.2f}")]
SPLIT = [("model_ms", "{:>7.2f}"), ("prefill_ms", "{:>8.2f}"), ("solver_ms", "{:>7.2f}"), ("state_ms", "{:>7.2f}"),
         ("host_ms", "{:>7.2f}"), ("instrumented_ms_per_fwd", "{:>7.2f}")]
FED = [("tokens_fed_per_fwd", "{:>9.1f}"), ("padding_share", "{:>7.3f}"), ("attention_cells_per_fwd", "{:>9.1f}"),
       ("attention_padding_share", "{:>8.3f}"), ("prefill_forwards", "{:>8}"), ("rows_waiting_on_prefill", "{:>8}"),
       ("graphs_warmup", "{:>7}"), ("recompiles_after_warmup", "{:>9}")]
HEADERS = {"tokens_fed_per_fwd": "fed/fwd", "padding_share": "padding", "attention_cells_per_fwd": "cells/fwd",
           "attention_padding_share": "cell pad", "prefill_forwards": "prefills", "rows_waiting_on_prefill": "waiting",
           "graphs_warmup": "graphs", "recompiles_after_warmup": "recompile",
           "tok_per_s": "tok/s", "fwd_per_s": "fwd/s", "ms_per_fwd": "ms/fwd", "tok_per_fwd": "tok/fwd",
           "model_ms": "model", "prefill_ms": "prefill", "solver_ms": "solver", "state_ms": "state",
           "host_ms": "host", "instrumented_ms_per_fwd": "total", "label": "config"}


def label(mode: str, gamma) -> str:
    return mode if gamma is None else f"sbd g={gamma:g}"


def compare(name: str, row: dict, ours, theirs, nfe: bool) -> dict:
    """How many rows have equal tokens (and NFE), and where the first differing row first differs."""
    equal = [a == b for a, b in zip(ours.tokens, theirs.tokens)]
    first = next((r for r, same in enumerate(equal) if not same), None)
    where = None
    if first is not None:
        a, b = ours.tokens[first], theirs.tokens[first]
        where = [first, next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))]
    return {"check": name, "config": label(row["mode"], row["gamma"]), "batch": row["batch"], "rows": len(equal),
            "rows_equal": sum(equal), "nfe_equal": sum(x == y for x, y in zip(ours.nfe, theirs.nfe)) if nfe else None,
            "first_difference": where}


def token_checks(results: dict) -> list[dict]:
    """engine == reference (tokens and NFE), engine NTP == generate, and a compiled engine == its eager run.
    ``results``: (decoder, mode, gamma, batch) -> (row, outcomes)."""
    checks = []
    for (decoder, mode, gamma, batch), (row, outcomes) in results.items():
        if decoder != "engine":
            continue
        ours = outcomes["first"]
        if ("reference", mode, gamma, batch) in results:
            reference = results["reference", mode, gamma, batch][1]["first"]
            checks.append(compare("engine == reference", row, ours, reference, nfe=True))
        for peer in PEERS:
            if mode == "ntp" and (peer, mode, gamma, batch) in results:
                checks.append(compare(f"engine == {peer}", row, ours, results[peer, mode, gamma, batch][1]["first"],
                                      nfe=False))
        if row["compiled"] and "instrumented" in outcomes:
            checks.append(compare("engine compiled == eager", row, ours, outcomes["instrumented"], nfe=True))
    return checks


def ratios(rows: list[dict]) -> dict:
    """engine / reference and engine NTP / generate (tokens/s); SBD against NTP per decoder (wall and NFE)."""
    by = {(r["decoder"], r["mode"], r["gamma"], r["batch"]): r for r in rows}
    out = {"engine_over_reference": [], "engine_ntp_over_generate": [], "sbd_over_ntp": []}
    for (decoder, mode, gamma, batch), row in by.items():
        reference = by.get(("reference", mode, gamma, batch))
        if decoder == "engine" and reference:
            out["engine_over_reference"].append({"config": label(mode, gamma), "batch": batch,
                                                 "tok_per_s": row["tok_per_s"] / reference["tok_per_s"]})
        for peer in PEERS:
            if decoder == "engine" and mode == "ntp" and (peer, "ntp", None, batch) in by:
                out["engine_ntp_over_generate"].append(
                    {"peer": peer, "batch": batch, "tok_per_s": row["tok_per_s"] / by[peer, "ntp", None, batch]
                     ["tok_per_s"]})
        ntp = by.get((decoder, "ntp", None, batch))
        if mode == "sbd" and ntp:
            wall, nfe = row["tok_per_s"] / ntp["tok_per_s"], row["tok_per_fwd"] / ntp["tok_per_fwd"]
            out["sbd_over_ntp"].append({"decoder": decoder, "gamma": gamma, "batch": batch, "wall_speedup": wall,
                                        "nfe_speedup": nfe, "wall_over_nfe": wall / nfe})
    return out


def print_rows(rows: list[dict]) -> None:
    """The per-configuration tables: speed and the instrumented run's ms per forward by phase; what was fed."""
    for extra in (SPLIT, FED):
        first = COLUMNS if extra is SPLIT else COLUMNS[:4]  # the fed table: the configuration, then what it fed
        print("\n" + " ".join(_cell(fmt, HEADERS.get(c, c)) for c, fmt in first + extra))
        for row in rows:
            cells = [fmt.format(label(row["mode"], row["gamma"]) if c == "label" else row[c]) for c, fmt in first]
            cells += [fmt.format(row[c]) if row.get(c) is not None else _cell(fmt, "-") for c, fmt in extra]
            print(" ".join(cells))


def _cell(fmt: str, text: str) -> str:
    """``text`` aligned and padded as the number format ``fmt`` (e.g. ``{:>9.1f}``) would be."""
    spec = fmt[2:-1]
    width = int("".join(ch for ch in spec.split(".")[0] if ch.isdigit()))
    return f"{text:{'<' if spec.startswith('<') else '>'}{width}}"


def print_summary(checks: list[dict], found: dict) -> None:
    print()
    for c in checks:
        nfe = "" if c["nfe_equal"] is None else f", NFE equal in {c['nfe_equal']}/{c['rows']}"
        where = "" if c["first_difference"] is None else \
            f" (first difference: row {c['first_difference'][0]}, token {c['first_difference'][1]})"
        print(f"tokens: {c['check']}, {c['config']}, batch {c['batch']}: {c['rows_equal']}/{c['rows']} rows{nfe}{where}")
    for r in found["engine_over_reference"]:
        print(f"engine / reference, {r['config']}, batch {r['batch']}: {r['tok_per_s']:.2f}x tokens/s")
    for r in found["engine_ntp_over_generate"]:
        print(f"engine NTP / {r['peer']}, batch {r['batch']}: {r['tok_per_s']:.2f}x tokens/s")
    for r in found["sbd_over_ntp"]:
        print(f"SBD g={r['gamma']:g} / NTP on the {r['decoder']}, batch {r['batch']}: wall {r['wall_speedup']:.2f}x, "
              f"NFE {r['nfe_speedup']:.2f}x, wall / NFE {r['wall_over_nfe']:.2f}")


def jsonable(obj):
    """Floats to 5 significant digits, infinity as the string "inf" (JSON has no infinity)."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return "inf" if math.isinf(obj) else float(f"{obj:.5g}")
    return obj
