"""Lossless rows (``verify``): every verified run checked against its arm's NTP decoding problem by problem (by the
per-problem token digests), what verification cost (acceptance), and the Lossless SBD section. The columns and the
check: docs/verify.md (the report).
"""

from __future__ import annotations

import logging
from collections import Counter

import pandas as pd

from .keys import ARM_KEY, NTP
from .render import number, x_text
from .section import Context, Section
from .seeds import final_budget
from .speed import floor

logger = logging.getLogger(__package__)

LOSSLESS_COLUMNS = ["lossless", "acceptance_rate", "drafts_whole", "accepted_hist"]


class NotLossless(ValueError):
    """A verified run wrote other tokens than its arm's NTP decoding."""


def acceptance(per_problem) -> dict:
    """A score file's acceptance columns (NaN / empty when its problems record no drafts)."""
    pairs = [(a, d) for record in (per_problem or {}).values() if isinstance(record, dict)
             for a, d in zip(record.get("accepted") or [], record.get("drafted") or [])]
    if not pairs:
        return {"acceptance_rate": float("nan"), "drafts_whole": float("nan"), "accepted_hist": ""}
    hist = Counter(a for a, _ in pairs)
    return {"acceptance_rate": sum(a for a, _ in pairs) / max(sum(d for _, d in pairs), 1),
            "drafts_whole": sum(a == d for a, d in pairs) / len(pairs),
            "accepted_hist": " ".join(f"{a}:{hist[a]}" for a in sorted(hist))}


def digests(per_problem) -> dict | None:
    """``{problem id: tokens digest}`` of a score file, or None when a problem has none."""
    out = {str(pid): r.get("tokens_sha") for pid, r in (per_problem or {}).items() if isinstance(r, dict)}
    return out if out and all(out.values()) else None


def lossless_labels(df: pd.DataFrame) -> list[str]:
    """The ``lossless`` column of loaded score rows (docs/verify.md); NotLossless when a verified run's tokens differ
    from its arm's NTP decoding."""
    ntp = {tuple(r[k] for k in ARM_KEY): r for _, r in df[df["sampler"] == NTP].iterrows()}
    labels = []
    for _, row in df.iterrows():
        verify = row["params"].get("verify", "none")
        if verify == "none":
            labels.append("")
        elif verify == "sample":
            labels.append("in distribution")
        else:
            labels.append(_checked(row, ntp.get(tuple(row[k] for k in ARM_KEY))))
    return labels


def _checked(row, base) -> str:
    if base is None or row["digests"] is None or base["digests"] is None:
        logger.warning("%s: a verified run not checked against NTP decoding (%s)", row["path"],
                       "no NTP-mode run of its arm" if base is None else "a score file without token digests")
        return "not checked"
    ours, theirs = row["digests"], base["digests"]
    for pid in sorted(set(ours) | set(theirs)):
        if ours.get(pid) != theirs.get(pid):
            raise NotLossless(f"score file {row['path']}: problem {pid!r} differs from the {row['objective']} arm's "
                              f"NTP decoding ({base['path']}): a verified run must write NTP mode's tokens")
    return "yes"


def lossless_markdown(final: pd.DataFrame) -> str:
    """The report's section on verified runs (empty without one); ``final``: the final budget's summary rows."""
    rows = final[final["lossless"].fillna("") != ""].sort_values(["model", "benchmark", "objective", "nfe_speedup"])
    if rows.empty:
        return ""
    lines = ["## Lossless SBD (verify)\n",
             "| model | benchmark | run | lossless | accuracy % | tokens / forward | NFE x | wall x | latency x | "
             "acceptance | drafts kept whole | kept draft tokens: drafts | engine |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples(index=False):
        lines.append(f"| {r.model} | {r.benchmark} | {r.label} | {r.lossless} | {100 * r.accuracy:.1f} | "
                     f"{r.tokens_per_forward:.2f} | {x_text(r.nfe_speedup)} | {x_text(r.wall_speedup)} | "
                     f"{x_text(r.latency_speedup)} | {_pct(r.acceptance_rate)} | {_pct(r.drafts_whole)} | "
                     f"{r.accepted_hist or '-'} | {r.engine or '-'} |")
    lines.append("\nA verified run checks every block against the same model's NTP mode in the forward that re-feeds "
                 "it (docs/verify.md). lossless: yes = every problem's tokens equal the arm's NTP decoding (checked "
                 "per problem). Speedups against the NTP arm. acceptance: draft tokens NTP mode kept / draft tokens "
                 "checked (a block's first token is NTP's own and not counted); kept draft tokens: how many drafts "
                 "kept that many tokens. engine: the decoder that ran (greedy verification runs on the engine, "
                 "eagerly; verify: sample on the reference decoder, whose wall speedups set it against the engine).")
    return "\n".join(lines) + "\n"


def _pct(value) -> str:
    return number(value, ".0f", scale=100, suffix="%")


class Lossless(Section):
    """The ``lossless`` and acceptance columns (a checked run's label says ``(lossless)``) and the Lossless SBD
    section, beside the A/A floor (an empty paragraph without a verified run); NotLossless when a verified run's
    tokens differ from its arm's NTP decoding."""

    column_names = tuple(LOSSLESS_COLUMNS)

    def columns(self, frame: pd.DataFrame, ctx: Context) -> pd.DataFrame:
        out = frame.copy()
        out["lossless"] = lossless_labels(out)
        out.loc[out["lossless"] == "yes", "label"] += " (lossless)"
        return out

    def markdown(self, ctx: Context) -> list[str]:
        section = lossless_markdown(final_budget(ctx.summary))
        return [section + "\n" + floor(ctx) if section else ""]  # its wall speedups, beside the A/A floor
