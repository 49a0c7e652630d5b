"""The paper's roofline (SBD, arXiv 2509.04185v1, App. A.2, eq. 16-17), analytic or fed with measured forward latencies.

A forward of ``width`` tokens per row, at ``batch`` rows with ``kv_len`` cached tokens per row, costs (``forward_time``)
- one gemm(m, n, k) = max(IO / bandwidth, 2mnk / peak), IO = (mk + nk + mn) x bytes per element, per weight matrix;
- one fused (FlashAttention-style) attention kernel: max(bytes of Q, K, V and the output / bandwidth,
  2 x 2 x tokens x keys x heads x head_dim / attention peak); attention runs in bf16, as in the paper.
Eq. 16: a block of k tokens decoded in l forwards (the first re-feeds the previous block: 2k tokens) against k NTP
forwards: ``speedup(l, k) = k T(1) / (T(2k) + (l - 1) T(k))``; eq. 17: the NFE speedup is k / l.

The ``paper`` preset keeps the shapes and constants exactly as the appendix prints them (they reproduce every printed
cell of Tables 3 and 4): its FFN gemms are gemm(nt, 4096, 4096*16384) and gemm(nt, 4096*16384, 4096), its K and V
gemms gemm(nt, 4096, 32*8), its attention reads the ``kv_len`` cached keys only, and it has no LM head (the paper
times one layer; 32 identical layers give exactly the same ratios). The real presets (Llama-3.1-8B, Qwen-3-8B) use
the shapes of their published config.json: Q/K/V/O and a gated FFN per layer, attention over cached plus fed keys,
and an LM head on every fed token.

``measured`` mode replaces T by a time(k) file of ``python -m sbd_core timing`` (``load_timing``, ``measured_time``).
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Callable

from .errors import UserError
from .records.timing import TimingFile, read_timing

logger = logging.getLogger(__name__)

#: T(batch, width, kv_len) in seconds: ``partial(forward_time, roofline)`` or ``partial(measured_time, timing)``.
TimeFn = Callable[[int, int, int], float]

BYTES_PER_ELEMENT = {"fp8": 1, "bf16": 2}
#: The grids the paper prints (Tables 3 and 4).
PAPER_KV_LENS = (2**4, 2**8, 2**10, 2**12, 2**14, 2**16, 2**20, 2**22)
TABLE3_GRID = {"batches": (1, 4, 8, 16), "block_sizes": (1, 2, 4, 8, 16, 32, 64), "kv_lens": PAPER_KV_LENS}
TABLE4_GRID = {"nfe_speedups": (2, 4, 8), "batches": (1, 4, 8), "block_sizes": (8, 16, 32, 64),
               "kv_lens": PAPER_KV_LENS}
TABLE_COLUMNS = {3: ("batch", "kv_len", "block_size", "slowdown"),
                 4: ("nfe_speedup", "batch", "kv_len", "block_size", "speedup")}


class RooflineInputError(UserError):
    """A preset, a grid or a timing file the user named is unknown or invalid (one line, naming the input)."""


# ----------------------------------------------------------------------------------------------------------------------
# Shapes, devices and their named presets
# ----------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's matrix shapes. ``as_printed``: the paper's appendix shapes (see the module doc)."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int  # 0: no LM head counted
    gated_ffn: bool = True  # SwiGLU: gate and up projections
    as_printed: bool = False

    @classmethod
    def from_hf_config(cls, name: str, config: dict) -> "ModelShape":
        """The shape of a Hugging Face Llama/Qwen-3 ``config.json`` (its dict)."""
        heads = config["num_attention_heads"]
        return cls(name=name, hidden=config["hidden_size"], intermediate=config["intermediate_size"],
                   layers=config["num_hidden_layers"], heads=heads,
                   kv_heads=config.get("num_key_value_heads", heads),
                   head_dim=config.get("head_dim") or config["hidden_size"] // heads, vocab=config["vocab_size"])


@dataclass(frozen=True)
class DevicePeaks:
    """A chip's memory bandwidth (bytes/s) and dense tensor-core peaks (FLOP/s, no sparsity) per dtype."""

    name: str
    bandwidth: float
    dense_flops: dict
    source: str


@dataclass(frozen=True)
class Roofline:
    """A model shape on a device at one weight/KV dtype (bytes per element and matmul peak follow the dtype)."""

    shape: ModelShape
    device: DevicePeaks
    dtype: str
    bytes_per_element: int = field(init=False)
    matmul_flops: float = field(init=False)
    attention_flops: float = field(init=False)

    def __post_init__(self):
        if self.dtype not in self.device.dense_flops:
            raise RooflineInputError(f"device {self.device.name!r} has no {self.dtype} tensor-core peak; "
                                     f"choose --dtype from {sorted(self.device.dense_flops)}")
        object.__setattr__(self, "bytes_per_element", BYTES_PER_ELEMENT[self.dtype])
        object.__setattr__(self, "matmul_flops", self.device.dense_flops[self.dtype])
        object.__setattr__(self, "attention_flops", self.device.dense_flops["bf16"])


MODELS = {
    # The appendix's generic 8B, shapes exactly as printed (hidden 4096, FFN 4 x hidden, 32 heads of 128, 8 KV heads).
    "paper-8b": ModelShape("paper-8b", hidden=4096, intermediate=16384, layers=32, heads=32, kv_heads=8, head_dim=128,
                           vocab=0, gated_ffn=False, as_printed=True),
    # meta-llama/Llama-3.1-8B config.json (head_dim = hidden / heads).
    "llama-3.1-8b": ModelShape("llama-3.1-8b", hidden=4096, intermediate=14336, layers=32, heads=32, kv_heads=8,
                               head_dim=128, vocab=128256),
    # Qwen/Qwen3-8B(-Base) config.json.
    "qwen-3-8b": ModelShape("qwen-3-8b", hidden=4096, intermediate=12288, layers=36, heads=32, kv_heads=8,
                            head_dim=128, vocab=151936),
    # The embedded default's model (config/config.yaml, models.tiny-llama): CPU runs of timing and the benchmarks.
    "tiny-llama": ModelShape("tiny-llama", hidden=96, intermediate=256, layers=3, heads=4, kv_heads=2, head_dim=24,
                             vocab=512),
}

DEVICES = {
    "h100-paper": DevicePeaks("h100-paper", bandwidth=3.35 * 1024**4, dense_flops={"fp8": 1978e12, "bf16": 989e12},
                              source="the paper's App. A.2 constants (3.35 TB/s read as 3.35 x 1024^4 B/s)"),
    "a100": DevicePeaks("a100", bandwidth=2039e9, dense_flops={"bf16": 312e12},
                        source="NVIDIA A100 datasheet, SXM4 80GB: BF16 312 TFLOPS dense (624 is with sparsity), "
                               "2,039 GB/s; no FP8 tensor cores"),
    "h100": DevicePeaks("h100", bandwidth=3.35e12, dense_flops={"fp8": 1979e12, "bf16": 989.5e12},
                        source="NVIDIA H100 datasheet, SXM: FP8 3,958 and BF16 1,979 TFLOPS are with sparsity, "
                               "halved to dense; 3.35 TB/s"),
    "h200": DevicePeaks("h200", bandwidth=4.8e12, dense_flops={"fp8": 1979e12, "bf16": 989.5e12},
                        source="NVIDIA H200 datasheet, SXM: FP8 3,958 and BF16 1,979 TFLOPS are with sparsity, "
                               "halved to dense; 4.8 TB/s"),
}

#: Named (model, device, dtype) combinations.
PRESETS = {"paper": ("paper-8b", "h100-paper", "fp8")}
#: The dtype of ``--model/--device`` when ``--dtype`` is not given.
DEFAULT_DTYPE = "bf16"


def roofline(preset: str | None = None, model: str | None = None, device: str | None = None,
             dtype: str | None = None) -> Roofline:
    """A ``Roofline`` from a named preset, or from a model, a device and a dtype (each named in MODELS/DEVICES)."""
    if preset is not None:
        if model or device or dtype:
            raise RooflineInputError(f"preset {preset!r} fixes the model, device and dtype: give a preset, or a model, "
                                     "a device and a dtype")
        if preset not in PRESETS:
            raise RooflineInputError(f"unknown roofline preset {preset!r}; known: {sorted(PRESETS)}")
        model, device, dtype = PRESETS[preset]
    if model not in MODELS:
        raise RooflineInputError(f"unknown model shape {model!r}; known: {sorted(MODELS)}")
    if device not in DEVICES:
        raise RooflineInputError(f"unknown device {device!r}; known: {sorted(DEVICES)}")
    if dtype not in BYTES_PER_ELEMENT:
        raise RooflineInputError(f"unknown dtype {dtype!r}; known: {sorted(BYTES_PER_ELEMENT)}")
    return Roofline(MODELS[model], DEVICES[device], dtype)


# ----------------------------------------------------------------------------------------------------------------------
# The analytic forward cost
# ----------------------------------------------------------------------------------------------------------------------


def gemm_time(m: int, n: int, k: int, roof: Roofline) -> float:
    """[m, k] @ [k, n]: max(IO / bandwidth, flops / peak), IO = (mk + nk + mn) elements."""
    io = (m * k + n * k + m * n) * roof.bytes_per_element
    return max(io / roof.device.bandwidth, 2 * m * n * k / roof.matmul_flops)


def attention_time(roof: Roofline, batch: int, width: int, kv_len: int) -> float:
    """One layer's fused attention: read Q, K, V, write the output; 2 matmuls of 2 x tokens x keys x q_dim flops."""
    s, tokens = roof.shape, batch * width
    keys = kv_len if s.as_printed else kv_len + width
    q_dim = s.heads * s.head_dim
    elements = 2 * tokens * q_dim + 2 * batch * keys * s.kv_heads * s.head_dim
    flops = 2 * (2 * tokens * keys * q_dim)
    return max(elements * roof.bytes_per_element / roof.device.bandwidth, flops / roof.attention_flops)


def linear_time(roof: Roofline, tokens: int) -> float:
    """One layer's weight gemms at ``tokens`` rows (the paper's printed shapes when ``as_printed``)."""
    s = roof.shape
    q_dim, kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim
    if s.as_printed:
        shapes = [(s.hidden, s.hidden * s.intermediate), (s.hidden * s.intermediate, s.hidden),
                  (s.hidden, q_dim), (s.hidden, s.heads * s.kv_heads), (s.hidden, s.heads * s.kv_heads),
                  (s.hidden, q_dim)]
    else:
        ffn_in = [(s.intermediate, s.hidden)] * (2 if s.gated_ffn else 1)
        shapes = [(q_dim, s.hidden), (kv_dim, s.hidden), (kv_dim, s.hidden), (s.hidden, q_dim),
                  *ffn_in, (s.hidden, s.intermediate)]
    return sum(gemm_time(tokens, n, k, roof) for n, k in shapes)


def forward_time(roof: Roofline, batch: int, width: int, kv_len: int) -> float:
    """T: seconds of one forward of ``width`` tokens per row, ``batch`` rows, ``kv_len`` cached tokens per row."""
    tokens = batch * width
    layer = attention_time(roof, batch, width, kv_len) + linear_time(roof, tokens)
    head = gemm_time(tokens, roof.shape.vocab, roof.shape.hidden, roof) if roof.shape.vocab else 0.0
    return roof.shape.layers * layer + head


# ----------------------------------------------------------------------------------------------------------------------
# Eq. 16 / 17 and the tables
# ----------------------------------------------------------------------------------------------------------------------


def nfe_speedup(block_size: int, forwards_per_block: float) -> float:
    """Eq. 17: k / l."""
    return block_size / forwards_per_block


def predicted_speedup(time_fn: TimeFn, block_size: int, forwards_per_block: float, batch: int, kv_len: int,
                      refeed_fn: TimeFn | None = None) -> float:
    """Eq. 16: k T(1) / (T(2k) + (l - 1) T(k)) at ``batch`` rows and ``kv_len`` cached tokens; l may be a mean.

    ``refeed_fn`` (measured mode) gives T(2k) as the decoder pays it: a forward of the re-fed block plus the new one,
    with logits for the new block only; without it T(2k) is ``time_fn`` at width 2k."""
    if not 1 <= forwards_per_block <= block_size:
        raise RooflineInputError(f"forwards per block must lie in [1, block size {block_size}], "
                                 f"got {forwards_per_block}")
    k, t = block_size, partial(time_fn, batch)
    first = (refeed_fn or time_fn)(batch, 2 * k, kv_len)
    return k * t(1, kv_len) / (first + (forwards_per_block - 1) * t(k, kv_len))


def slowdown(time_fn: TimeFn, block_size: int, batch: int, kv_len: int) -> float:
    """Table 3's cell: T(k) / T(1)."""
    return time_fn(batch, block_size, kv_len) / time_fn(batch, 1, kv_len)


def table3(time_fn: TimeFn, batches, kv_lens, block_sizes, covered=lambda batch, width, kv: True) -> list[tuple]:
    """Rows (batch, kv_len, block_size, slowdown); ``covered`` drops cells whose widths time_fn cannot give."""
    return [(b, n, k, slowdown(time_fn, k, b, n)) for b in batches for n in kv_lens for k in block_sizes
            if covered(b, 1, n) and covered(b, k, n)]


def table4(time_fn: TimeFn, nfe_speedups, batches, kv_lens, block_sizes,
           covered=lambda batch, width, kv: True, refeed_fn: TimeFn | None = None,
           refeed_covered=None) -> list[tuple]:
    """Rows (nfe_speedup, batch, kv_len, block_size, speedup) at l = k / nfe_speedup forwards per block."""
    first_covered = refeed_covered or covered
    return [(s, b, n, k, predicted_speedup(time_fn, k, k / s, b, n, refeed_fn))
            for s in nfe_speedups for b in batches for n in kv_lens for k in block_sizes
            if k >= s and covered(b, 1, n) and covered(b, k, n) and first_covered(b, 2 * k, n)]


# ----------------------------------------------------------------------------------------------------------------------
# Measured time(k): the file of ``python -m sbd_core timing``
# ----------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing(TimingFile):
    """A time(k) file (its header and rows: :class:`sbd_core.records.timing.TimingFile`) read for the roofline: median
    seconds as ``grids[batch][width][kv_len]`` (width 1: the ``ntp`` rows, wider: the ``block`` rows; ``forward`` rows
    where those are missing) and ``refeeds`` (the same for the ``refeed`` rows)."""

    grids: dict = field(default_factory=dict)
    refeeds: dict = field(default_factory=dict)

    @property
    def n_rounds(self) -> int:
        """The rounds of the file (0: measured before rounds)."""
        return max((len(v) for v in self.rounds.values()), default=0)

    def at_round(self, index: int) -> "Timing":
        """This file as round ``index`` measured it: the same Timing with that round's values as its grids (rows
        without that round left out)."""
        by_step: dict = {}
        for (step, batch, width, kv_len), values in self.rounds.items():
            if index < len(values):
                by_step.setdefault(step, {}).setdefault(batch, {}).setdefault(width, {})[kv_len] = values[index]
        grids, refeeds = _grids(by_step)
        return replace(self, by_step=by_step, grids=grids, refeeds=refeeds, rounds={})

    def batches(self) -> list[int]:
        return sorted(self.grids)

    def kv_lens(self) -> list[int]:
        return sorted({n for by_width in self.grids.values() for by_kv in by_width.values() for n in by_kv})

    def covers(self, batch: int, width: int, kv_len: int, refeed: bool = False) -> bool:
        """Whether ``measured_time`` gives this point without extrapolating."""
        try:
            measured_time(self, batch, width, kv_len, refeed=refeed)
        except RooflineInputError:
            return False
        return True


def load_timing(path) -> Timing:
    """Read and validate a time(k) file (:func:`sbd_core.records.timing.read_timing`) as a :class:`Timing`."""
    file = read_timing(path)
    grids, refeeds = _grids(file.by_step)
    return Timing(**{f.name: getattr(file, f.name) for f in fields(file)}, grids=grids, refeeds=refeeds)


def _grids(by_step: dict) -> tuple[dict, dict]:
    """``(grids, refeeds)`` of :class:`Timing` from ``{step: {batch: {width: {kv_len: seconds}}}}``."""
    grids: dict = {}
    for step in ("forward", "block", "ntp"):  # later steps win: width 1 from ntp, wider from block rows
        for batch, by_width in by_step.get(step, {}).items():
            for width, by_kv in by_width.items():
                if step != "ntp" or width == 1:
                    grids.setdefault(batch, {})[width] = by_kv
    return grids, by_step.get("refeed", {})


def _neighbours(xs: list, x: int, what: str, extrapolate: bool) -> list:
    """The measured points x is read from: itself, the two around it, or (extrapolating) the two at the near end."""
    if x in xs:
        return [x]
    if not xs[0] < x < xs[-1]:
        if not extrapolate or len(xs) < 2:
            raise RooflineInputError(f"{what} {x} is outside the measured range {xs[0]}..{xs[-1]} "
                                     "(no extrapolation)")
        logger.warning("%s %s: extrapolated beyond the measured range %s..%s", what, x, xs[0], xs[-1])
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    return [xs[i - 1], xs[i]]


def _linear(points: dict, x: float) -> float:
    """The line through one or two (x_i, y_i) points, at x."""
    if len(points) == 1:
        return next(iter(points.values()))
    (x0, y0), (x1, y1) = sorted(points.items())
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def measured_time(timing: Timing, batch: int, width: int, kv_len: int, extrapolate: bool = False,
                  refeed: bool = False) -> float:
    """Median seconds of a forward: a measured row, or linear interpolation in kv_len (per width), then in width;
    ``refeed``: of the re-feed step (see :data:`sbd_core.records.timing.STEPS`).

    The batch must be measured. Outside the measured widths or kv_lens it raises RooflineInputError, unless
    ``extrapolate`` (then it extends the end segment linearly and logs a warning).
    """
    grids = timing.refeeds if refeed else timing.grids
    where = f"timing file {timing.path}: {'refeed step, ' if refeed else ''}batch {batch}"
    if batch not in grids:
        raise RooflineInputError(f"{where} is not measured (measured batches: {sorted(grids)})")
    grid = grids[batch]
    at_width = {}
    for w in _neighbours(sorted(grid), width, f"{where}, width", extrapolate):
        kvs = _neighbours(sorted(grid[w]), kv_len, f"{where}, width {w}, kv_len", extrapolate)
        at_width[w] = _linear({n: grid[w][n] for n in kvs}, kv_len)
    return _linear(at_width, width)


# ----------------------------------------------------------------------------------------------------------------------
# The ``roofline`` command
# ----------------------------------------------------------------------------------------------------------------------


def build_table(table: int, roof: Roofline | None = None, timing: Timing | None = None, batches=None,
                kv_lens=None, block_sizes=None) -> list[tuple]:
    """Table 3 or 4 from the analytic model (``roof``) or a time(k) file (``timing``: its own batches and kv_lens,
    cells whose widths it covers); a grid argument left None takes the paper's (analytic) or the file's (measured)."""
    if (roof is None) == (timing is None):
        raise RooflineInputError("give exactly one of an analytic roofline or a timing file")
    grid = dict(TABLE3_GRID if table == 3 else TABLE4_GRID)
    if timing is not None:
        grid.update(batches=timing.batches(), kv_lens=timing.kv_lens())
    for name, values, low in (("batches", batches, 1), ("kv_lens", kv_lens, 0), ("block_sizes", block_sizes, 1)):
        if values:
            if min(values) < low:
                raise RooflineInputError(f"{name} must be integers >= {low}, got {list(values)}")
            grid[name] = values
    time_fn = partial(forward_time, roof) if roof is not None else partial(measured_time, timing)
    covered = timing.covers if timing is not None else (lambda b, w, n: True)
    if table == 3:
        return table3(time_fn, grid["batches"], grid["kv_lens"], grid["block_sizes"], covered)
    refeed = {}
    if timing is not None and timing.refeeds:  # T(2k) as the decoder pays it
        refeed = {"refeed_fn": partial(measured_time, timing, refeed=True),
                  "refeed_covered": partial(timing.covers, refeed=True)}
    return table4(time_fn, grid["nfe_speedups"], grid["batches"], grid["kv_lens"], grid["block_sizes"], covered,
                  **refeed)


def write_table(rows: list[tuple], table: int, out) -> str:
    """CSV text of a table (6 decimals for the ratio), written to ``out`` when given; returns the text."""
    lines = [",".join(TABLE_COLUMNS[table])]
    lines += [",".join(str(v) for v in row[:-1]) + f",{row[-1]:.6f}" for row in rows]
    text = "\n".join(lines) + "\n"
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
    return text


def run_table(table: int, out=None, preset=None, model=None, device=None, dtype=None, measured=None,
              batches=None, kv_lens=None, block_sizes=None) -> str:
    """The ``roofline`` command: one source (a preset, a model on a device, or a time(k) file) -> the table's CSV."""
    if measured is not None:
        if preset or model or device or dtype:
            raise RooflineInputError("--measured takes the times from the file: drop --preset/--model/--device/--dtype")
        source = {"timing": load_timing(measured)}
        what = f"measured time(k) of {measured}"
    else:
        if preset is None and (model is None or device is None):
            raise RooflineInputError("give --preset NAME, or --model NAME --device NAME [--dtype NAME], "
                                     "or --measured FILE")
        roof = roofline(preset, model, device, dtype if preset else dtype or DEFAULT_DTYPE)
        source = {"roof": roof}
        what = f"{roof.shape.name} on {roof.device.name} {roof.dtype} ({roof.device.source})"
    rows = build_table(table, batches=batches, kv_lens=kv_lens, block_sizes=block_sizes, **source)
    if not rows:
        raise RooflineInputError(f"table {table}: no cell of the grid is covered by {what}")
    logger.info("roofline table %d: %d cells from %s%s", table, len(rows), what, f" -> {out}" if out else "")
    return write_table(rows, table, out)
