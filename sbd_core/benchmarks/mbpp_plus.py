"""MBPP+ (evalplus release v0.2.0, 378 of MBPP's problems with extra inputs), the paper's "MBPP" column.

The paper writes "MBPP"; we run evalplus's MBPP+ because the other numbers in that column (DiffuCoder's) appear to be
its MBPP+ scores, and because evalplus scores it with the same executor as HumanEval+. Protocol: the one of
:mod:`sbd_core.benchmarks.humaneval_plus` with the paper's 256 new tokens.

Data: the pinned evalplus release (downloaded by evalplus's helpers); offline, ``data`` takes a JSON-lines file in
evalplus's MBPP+ schema (ids ``Mbpp/<n>``). Problem ids: ``task_id``.
"""

from .chat import THINKING_OFF
from .code import CodeBenchmark
from .settings import CodeSettings

BENCHMARK = CodeBenchmark(
    name="mbpp_plus", paper_column="mbpp", group="chat", dataset="mbpp", release=("MbppPlus", "v0.2.0"),
    source={"dataset": "evalplus MBPP+", "release": "v0.2.0"},
    defaults=CodeSettings(max_new_tokens=256, system_prompt=THINKING_OFF))
