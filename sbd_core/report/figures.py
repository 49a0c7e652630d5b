"""Figures: accuracy vs NFE speedup per task and the paper's Figure 1 per model (PNG and PDF, rendered in memory), their
sections of report.md, the axes and finish every figure of the report shares, and a PNG size reader."""

from __future__ import annotations

import io
import struct

import matplotlib
import pandas as pd

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402 (after choosing the backend)

from .keys import NTP, is_baseline
from .outputs import FIGURE1_BENCHMARK, FIGURE_FORMATS, figure1_stem, figure_files, speedup_stem
from .render import figure_links
from .section import Context, Section
from .seeds import final_runs
from .tables import family_rank

#: Figure geometry; PNGs come out FIG_SIZE_IN * FIG_DPI pixels.
FIG_SIZE_IN = (6.4, 4.8)
FIG_DPI = 100
MIN_SPAN = 10.0  # the y axis shows at least this many points of accuracy


def new_axes():
    """A figure of the report's size and one axes."""
    fig = Figure(figsize=FIG_SIZE_IN, dpi=FIG_DPI)
    return fig, fig.add_subplot(1, 1, 1)


def rendered(fig, ax, accuracy: pd.Series) -> dict[str, bytes]:
    """Shared finish: a y range of at least MIN_SPAN points, grid, legend; the PNG and PDF bytes."""
    accuracy = accuracy.dropna()
    if len(accuracy):  # at least MIN_SPAN points of accuracy, so a one-problem difference does not fill the plot
        top, bottom = float(accuracy.max()), float(accuracy.min())
        ax.set_ylim(max(-1.0, min(bottom, top - MIN_SPAN) - 1.0), min(101.0, top + 1.0))
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return figure_bytes(fig)


def figure_bytes(fig) -> dict[str, bytes]:
    """The figure's file contents in each of FIGURE_FORMATS: ``{'png': ..., 'pdf': ...}``."""
    out = {}
    for fmt in FIGURE_FORMATS:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=FIG_DPI)
        out[fmt] = buf.getvalue()
    return out


def speedup_figure(summary: pd.DataFrame, benchmark: str) -> dict[str, bytes]:
    """Draw accuracy (%) vs NFE speedup for one benchmark; return {'png': ..., 'pdf': ...} file contents."""
    data = summary[summary["benchmark"] == benchmark]
    models = sorted(data["model"].unique())
    multi = len(models) > 1
    fig, ax = new_axes()
    markers = "osD^vP<>X"
    for model in models:
        sub = data[data["model"] == model]
        prefix = f"{model}: " if multi else ""
        _plot_families(ax, sub, prefix, markers)
        _plot_reference_points(ax, sub, prefix)
    ax.set_xlabel("NFE speedup vs NTP baseline (x)")
    ax.set_ylabel("Accuracy (%)")
    ax.set_title(f"{benchmark}: accuracy vs NFE speedup")
    return rendered(fig, ax, 100 * data["accuracy"])


def figure1_bytes(summary: pd.DataFrame, model: str, benchmark: str = FIGURE1_BENCHMARK) -> dict[str, bytes]:
    """The paper's Figure 1 for one model: pass@1 (%) on ``benchmark`` against NFE speedup; the SBD arm decoded
    with the EB-Sampler (entropy proxy), one point per gamma labelled with gamma and its speedup, and the NTP arm at
    1x (a star, and a dashed line at its pass@1)."""
    data = summary[(summary["benchmark"] == benchmark) & (summary["model"] == model)]
    fig, ax = new_axes()
    sbd = data[(data["objective"] == "sbd") & (data["family"] == "eb-entropy")].dropna(subset=["nfe_speedup"])
    sbd = sbd.sort_values("nfe_speedup")
    if len(sbd):
        ax.plot(sbd["nfe_speedup"], 100 * sbd["accuracy"], marker="o", color="tab:orange", label=f"{model} SBD")
        for x, y, gamma in zip(sbd["nfe_speedup"], 100 * sbd["accuracy"], sbd["gamma"]):
            ax.annotate(f"\u03b3={gamma:g}: {x:.1f}x", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=7)
    ntp = data[is_baseline(data)]
    if len(ntp):
        ax.axhline(100 * ntp["accuracy"].iloc[0], color="gray", linestyle="--", linewidth=1)
        ax.plot([1.0], 100 * ntp["accuracy"], linestyle="none", marker="*", markersize=14, color="black",
                label=f"{model} NTP")
    ax.margins(x=0.15)  # room for the labels of the fastest point
    ax.set_xlabel("Speedup (NFE reduction, x)")
    ax.set_ylabel("Pass@1 (%)")
    ax.set_title(f"{benchmark}: pass@1 vs speedup ({model})")
    return rendered(fig, ax, 100 * data["accuracy"])


def _plot_families(ax, sub: pd.DataFrame, prefix: str, markers: str) -> None:
    """One line+markers curve per (objective, solver family) of the block samplers, points sorted by speedup; a family of
    lossless runs (verified, checked against NTP mode: :mod:`.lossless`) is dashed with hollow markers."""
    blocks = sub[sub["mode"] == "sbd"].dropna(subset=["nfe_speedup"])
    curves = sorted({(o, f) for o, f in zip(blocks["objective"], blocks["family"])},
                    key=lambda of: (of[0], family_rank(of[1])))
    for i, (objective, family) in enumerate(curves):
        pts = blocks[(blocks["objective"] == objective) & (blocks["family"] == family)].sort_values("nfe_speedup")
        lossless = (pts["lossless"] == "yes").all()  # verified runs that wrote NTP mode's tokens: dashed, hollow
        ax.plot(pts["nfe_speedup"], 100 * pts["accuracy"], marker=markers[i % len(markers)],
                linestyle="--" if lossless else "-", markerfacecolor="none" if lossless else None,
                label=f"{prefix}{objective} model, {family}" + (" (lossless)" if lossless else ""))
        for x, y, tag in zip(pts["nfe_speedup"], 100 * pts["accuracy"], pts["sampler"]):  # tag: the setting
            setting = tag[len(family) + 1:] if tag.startswith(f"{family}-") else tag
            ax.annotate(setting, (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7)


def _plot_reference_points(ax, sub: pd.DataFrame, prefix: str) -> None:
    """Mark the NTP arm (black star), the SBD model decoded with NTP sampling (hollow diamond) and the training-free
    peers on the NTP arm (a triangle each, named by its label)."""
    ntp = sub[is_baseline(sub)]
    if not ntp.empty:
        ax.plot(ntp["nfe_speedup"].fillna(1.0), 100 * ntp["accuracy"], linestyle="none", marker="*", markersize=14,
                color="black", label=f"{prefix}NTP model")
    others = sub[(sub["objective"] != NTP) & (sub["sampler"] == NTP)]  # the other arms' NTP decoding
    for (objective, grp), color in zip(others.groupby("objective", sort=False), ("tab:red", "tab:purple", "tab:brown")):
        ax.plot(grp["nfe_speedup"].fillna(1.0), 100 * grp["accuracy"], linestyle="none", marker="D",
                markersize=9, markerfacecolor="none", markeredgecolor=color, markeredgewidth=1.5,
                label=f"{prefix}{objective} model, NTP sampling")
    peers = sub[sub["mode"] == "hf"].dropna(subset=["nfe_speedup"])
    for (label, grp), marker in zip(peers.groupby("label", sort=True), "^v<>"):
        ax.plot(grp["nfe_speedup"], 100 * grp["accuracy"], linestyle="none", marker=marker, markersize=9,
                color="tab:gray", label=f"{prefix}{label}")


def png_size(data: bytes) -> tuple[int, int]:
    """Return (width, height) of PNG bytes; raise ValueError if they are not a PNG."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    return struct.unpack(">II", data[16:24])


def figure1_models(final: pd.DataFrame) -> list[str]:
    """The models that ran Figure 1's benchmark."""
    return sorted(final.loc[final["benchmark"] == FIGURE1_BENCHMARK, "model"].unique())


class Figure1(Section):
    """The paper's Figure 1, one per model that ran its benchmark (none without one)."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        final = final_runs(ctx)
        return {f"{figure1_stem(model)}.{fmt}": data for model in figure1_models(final)
                for fmt, data in figure1_bytes(final, model, FIGURE1_BENCHMARK).items()}

    def markdown(self, ctx: Context) -> list[str]:
        models = figure1_models(final_runs(ctx))
        if not models:
            return []
        return [f"## Figure 1: {FIGURE1_BENCHMARK} pass@1 against NFE speedup (SBD over gamma, NTP at 1x)\n",
                *figure_links([figure_files(figure1_stem(model))[0] for model in models])]


class SpeedupFigures(Section):
    """Accuracy against NFE speedup, one figure per benchmark."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        return {f"{speedup_stem(bench)}.{fmt}": data for bench in _benchmarks(ctx)
                for fmt, data in speedup_figure(final_runs(ctx), bench).items()}

    def markdown(self, ctx: Context) -> list[str]:
        return ["## Figures: accuracy vs NFE speedup\n",
                *figure_links([figure_files(speedup_stem(bench))[0] for bench in _benchmarks(ctx)])]


def _benchmarks(ctx: Context) -> list[str]:
    return sorted(ctx.summary["benchmark"].unique())
