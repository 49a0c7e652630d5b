"""How the report writes things down: numbers (a dash where there is none), markdown and LaTeX tables, CSV bytes and
figure links. Every table and section of the report formats through here.
"""

from __future__ import annotations

import pandas as pd

#: Shown in tables where no value exists (the paper prints an en dash).
DASH = "\u2013"
#: Shown in the report's sections where no value exists.
MISSING = "-"


def number(value, spec: str, *, scale: float = 1.0, prefix: str = "", suffix: str = "", missing: str = MISSING) -> str:
    """``value`` (times ``scale``) formatted with ``spec`` between ``prefix`` and ``suffix``; ``missing`` for NaN or
    None."""
    if value is None or pd.isna(value):
        return missing
    return f"{prefix}{value if scale == 1.0 else scale * value:{spec}}{suffix}"


def x_text(value) -> str:
    """A speedup as ``2.31x`` (``-`` when absent)."""
    return number(value, ".2f", suffix="x")


def text_or_dash(value) -> str:
    """A text cell: the value as a string, DASH for NaN or an empty string."""
    return DASH if pd.isna(value) or str(value).strip() == "" else str(value)


def to_markdown(df: pd.DataFrame) -> str:
    """Render a DataFrame as a GitHub-flavoured markdown table (no index; '|' escaped)."""
    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in rec) + " |" for rec in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


LATEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", DASH: "--", "\u03b3": r"$\gamma$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters (and map the en dash / gamma to LaTeX)."""
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def to_latex(df: pd.DataFrame, caption: str | None = None) -> str:
    """Render a DataFrame as a plain LaTeX tabular (no booktabs), all cells escaped."""
    spec = "l" * len(df.columns)
    lines = []
    if caption:
        lines.append(f"% {latex_escape(caption)}")
    lines += [f"\\begin{{tabular}}{{{spec}}}", "\\hline"]
    lines.append(" & ".join(latex_escape(c) for c in df.columns) + r" \\")
    lines.append("\\hline")
    lines += [" & ".join(latex_escape(v) for v in rec) + r" \\" for rec in df.itertuples(index=False)]
    lines += ["\\hline", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def csv_bytes(df: pd.DataFrame) -> bytes:
    """CSV encoding of a DataFrame (no index)."""
    return df.to_csv(index=False).encode("utf-8")


def figure_links(names: list[str]) -> list[str]:
    """report.md's lines for figures ``<stem>.png``: the image, then a link to its PDF."""
    return [f"![{name[:-4]}]({name})\n\n[{name[:-4]}.pdf]({name[:-4]}.pdf)\n" for name in names]
