"""LiveCodeBench fixtures in the hub dataset's own schema (``livecodebench/code_generation_lite`` rows): stdin and
functional problems with their reference programs, programs with formatting edge cases (right and wrong), a hostile
pickle and a zlib bomb, and a writer for shard files."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

SHARD_OF_YEAR = {2023: "test.jsonl", 2024: "test5.jsonl", 2025: "test6.jsonl"}


def encode_private(tests: list[dict]) -> str:
    """Private tests as the hub stores them: base64 of zlib of a pickle of the JSON string."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def stdin(i: str, o: str) -> dict:
    return {"input": i, "output": o, "testtype": "stdin"}


def call(i: str, o: str) -> dict:
    return {"input": i, "output": o, "testtype": "functional"}


def row(qid: str, date: str, content: str, public: list, private: list, starter: str = "", func_name=None,
        plain_private: bool = False, difficulty: str = "easy", platform: str | None = None) -> dict:
    platform = platform or ("leetcode" if func_name else "atcoder")
    return {"question_title": qid.replace("-", " ").title(), "question_content": content, "platform": platform,
            "question_id": qid, "contest_id": qid.split("_")[0], "contest_date": f"{date}T00:00:00",
            "starter_code": starter, "difficulty": difficulty, "public_test_cases": json.dumps(public),
            "private_test_cases": json.dumps(private) if plain_private else encode_private(private),
            "metadata": json.dumps({"func_name": func_name} if func_name else {})}


def starter(signature: str) -> str:
    return f"class Solution:\n    def {signature}:\n        "


# (row, reference program); dates place them in shards test.jsonl (2023), test5.jsonl (2024), test6.jsonl (2025)
PROBLEMS = [
    (row("abc301_a", "2023-06-10", "Print the sum of N integers.",
         [stdin("3\n1 2 3\n", "6\n")],
         [stdin("1\n-5\n", "-5"), stdin("4\n10 20 30 40\n", "100\n"),
          stdin("2\n" + "9" * 30 + " 1\n", "1" + "0" * 30)]),
     "n = int(input())\nprint(sum(map(int, input().split())))\n"),
    (row("abc302_b", "2023-07-01", "Print the average of N integers (absolute error: none tolerated).",
         [stdin("2\n1 2\n", "1.5000000000\n")], [stdin("3\n1 1 1\n", "1.0000000000"), stdin("1\n7\n", "7.0000000000")],
         difficulty="medium"),
     "n = int(input())\na = list(map(int, input().split()))\nprint(sum(a) / n)\n"),  # "1.5": equal as decimals
    (row("abc380_c", "2024-11-16", "Print an H by W grid of '#'.",
         [stdin("2 3\n", "###\n###\n")], [stdin("1 1\n", "#"), stdin("3 2\n", "##\n##\n##\n")], difficulty="hard"),
     "h, w = map(int, input().split())\nfor _ in range(h):\n    print('#' * w)\n"),
    (row("arc190_a", "2024-12-20", "Print Yes if N is even, else No.",
         [stdin("4\n", "Yes\n")], [stdin("7\n", "No\n"), stdin("0\n", "Yes")], difficulty="medium"),
     "import sys\n\ndef main():\n    n = int(sys.stdin.readline())\n    print('Yes' if n % 2 == 0 else 'No')\n\n"
     "if __name__ == '__main__':\n    main()\n"),
    (row("2051A", "2025-01-10", "T test cases: print the square of each N.",
         [stdin("2\n3\n5\n", "9\n25\n")], [stdin("3\n1\n2\n10\n", "1\n4\n100")], plain_private=True,
         platform="codeforces"),
     "data = sys.stdin.read().split()\nfor x in data[1:]:\n    print(int(x) ** 2)\nexit(0)\n"),  # sys: the prelude's
    (row("two-sum", "2023-08-05", "Return the indices of the two numbers adding up to target.",
         [call("[2,7,11,15]\n9", "[0, 1]")], [call("[3,2,4]\n6", "[1, 2]"), call("[3,3]\n6", "[0, 1]")],
         starter=starter("twoSum(self, nums: List[int], target: int) -> List[int]"), func_name="twoSum"),
     "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        seen = {}\n"
     "        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n"
     "            seen[x] = i\n"),
    (row("longest-word", "2024-10-12", "Return the longest word (the first of equal length).",
         [call('["a","bb","ccc"]', '"ccc"')], [call('["xy","ab"]', '"xy"'), call('["z"]', '"z"')],
         starter=starter("longestWord(self, words: List[str]) -> str"), func_name="longestWord", difficulty="medium"),
     "class Solution:\n    def longestWord(self, words: List[str]) -> str:\n        return max(words, key=len)\n"),
    (row("is-power-of-two", "2025-02-08", "Return whether n is a power of two.",
         [call("16", "true")], [call("6", "false"), call("1", "true")],
         starter=starter("isPowerOfTwo(self, n: int) -> bool"), func_name="isPowerOfTwo"),
     "class Solution:\n    def isPowerOfTwo(self, n: int) -> bool:\n        return n > 0 and n & (n - 1) == 0\n"),
    (row("average-value", "2025-03-15", "Return the mean of nums.",
         [call("[1,2,3,4]", "2.5")], [call("[5]", "5.0"), call("[1,2]", "1.5")],
         starter=starter("averageValue(self, nums: List[int]) -> float"), func_name="averageValue", difficulty="hard"),
     "class Solution:\n    def averageValue(self, nums: List[int]) -> float:\n        return sum(nums) / len(nums)\n"),
    (row("min-max-pair", "2025-04-01", "Return [min, max] of nums.",
         [call("[3,1,2]", "[1, 3]")], [call("[5,5]", "[5, 5]")],
         starter=starter("minMax(self, nums: List[int]) -> List[int]"), func_name="minMax", difficulty="medium"),
     "class Solution:\n    def minMax(self, nums: List[int]) -> List[int]:\n        return min(nums), max(nums)\n"),
]
ROWS = [r for r, _ in PROBLEMS]
REFERENCE = {r["question_id"]: program for r, program in PROBLEMS}

# (question_id, program, passes): formatting edge cases, judged the same by lcb_runner and by us
EDGE_CASES = [
    ("abc301_a", "n = int(input())\nprint(' ' + str(sum(map(int, input().split()))) + '   \\n\\n')\n", True),
    ("abc301_a", "import sys\nprint(sum(map(int, sys.stdin.read().split()[1:])), end='')\n", True),
    ("abc301_a", "n = int(input())\nprint(sum(map(int, input().split())) + 1)\n", False),
    ("abc301_a", "from sys import stdin\nstdin.readline()\nprint(sum(map(int, stdin.readline().split())))\n", True),
    ("abc302_b", "n = int(input())\na = list(map(int, input().split()))\nprint('%.3e' % (sum(a) / n))\n", True),
    ("abc302_b", "n = int(input())\na = list(map(int, input().split()))\nprint(sum(a) / n + 1e-7)\n", False),
    ("abc380_c", "h, w = map(int, input().split())\nprint('\\n'.join(['#' * w + '  '] * h))\n", True),
    ("abc380_c", "h, w = map(int, input().split())\nprint('\\n\\n'.join(['#' * w] * h))\n", False),
    ("arc190_a", "n = int(input())\nprint('YES' if n % 2 == 0 else 'NO')\n", False),
    ("arc190_a", "n = int(input())\nprint('Yes' if n % 2 == 0 else 'No', 'x')\n", False),
    ("2051A", "t = int(input())\nfor _ in range(t):\n    x = int(input())\n    print(x * x, end=' ')\n", False),
    ("2051A", "t = int(input())\nfor _ in range(t):\n    print(int(input()) ** 2)\nraise SystemExit(3)\n", True),
    ("two-sum", REFERENCE["two-sum"].replace("[seen[target - x], i]", "(seen[target - x], i)"), True),
    ("two-sum", REFERENCE["two-sum"].replace("[seen[target - x], i]", "[i, seen[target - x]]"), False),
    ("longest-word", "def longestWord(words):\n    return max(words, key=len)\n", True),  # a module-level function
    ("longest-word", "class Solution:\n    def longestWord(self, words):\n        return [max(words, key=len)]\n",
     False),
    ("is-power-of-two", "class Solution:\n    def isPowerOfTwo(self, n):\n        return int(n > 0 and n & (n - 1) == 0)\n",
     True),  # 1 == True
    ("is-power-of-two", "class Solution:\n    def isPowerOfTwo(self, n):\n        return str(n & (n - 1) == 0)\n",
     False),
    ("average-value", "class Solution:\n    def averageValue(self, nums):\n        return sum(nums) // len(nums)\n", False),
    ("average-value", "class Solution:\n    def averageValue(self, nums):\n        raise ValueError('no')\n", False),
    ("min-max-pair", "class Solution:\n    def minMax(self, nums):\n        return [(min(nums), max(nums))]\n", False),
    ("abc301_a", "print(", False),  # does not compile
    ("abc380_c", "while True:\n    pass\n", False),  # runs out of time
    ("two-sum", "class Solution:\n    def twoSum(self, nums, target):\n        while True:\n            pass\n", False),
]

# Idioms judged by the official grader (the wheel's testing_util, run in tests/official_lcb.py) as ``official``:
# (name, question_id, program, official passes). IDIOMS run in the default test tier, MORE_IDIOMS in the slow one.
_SUM = "n = int(input())\nprint(sum(map(int, input().split())))\n"
_SUM_MAIN = "def main():\n    n = int(input())\n    print(sum(map(int, input().split())))\n\n"
IDIOMS = [
    # stdin programs run as lcb_runner runs them: a function body, with its mocks of sys.stdin and sys.stdout
    ("open(0)", "abc301_a", "data = open(0).read().split()\nprint(sum(map(int, data[1:])))\n", False),
    ("from sys import stdin, readline()[:-1]", "abc301_a",
     "from sys import stdin\nn = int(stdin.readline()[:-1])\nprint(sum(map(int, stdin.readline()[:-1].split())))\n",
     False),
    ("os.write(1, ...)", "abc301_a",
     "import os\nn = int(input())\nos.write(1, (str(sum(map(int, input().split()))) + '\\n').encode())\n", False),
    ("'__main__' == __name__", "abc301_a", _SUM_MAIN + "if '__main__' == __name__:\n    main()\n", False),
    ("if __name__ == '__main__' last", "abc301_a", _SUM_MAIN + "if __name__ == \"__main__\":\n    main()\n", True),
    ("for line in sys.stdin", "abc301_a",
     "import sys\nlines = []\nfor line in sys.stdin:\n    lines.append(line)\nprint(sum(map(int, lines[1].split())))\n",
     True),
    ("sys.stdin.buffer", "abc301_a",
     "import sys\ndata = sys.stdin.buffer.read().split()\nprint(sum(map(int, data[1:])))\n", False),
    ("sys.stdout.buffer", "abc301_a",
     "import sys\ninput()\nsys.stdout.buffer.write(str(sum(map(int, input().split()))).encode())\n", False),
    ("global of a top-level name", "abc301_a", "total = 0\n\ndef add(x):\n    global total\n    total += x\n\n"
     "n = int(input())\nfor x in input().split():\n    add(int(x))\nprint(total)\n", False),
    ("class Solution in a stdin program", "abc301_a", "class Solution:\n    def solve(self):\n        input()\n"
     "        print(sum(map(int, input().split())))\n\nSolution().solve()\n", False),
    ("top-level names are locals", "abc301_a",
     "n = int(input())\ns = sum(map(int, input().split()))\nprint(s if 's' not in globals() else -1)\n", True),
    ("heavy top-level loop", "abc301_a", "n = int(input())\na = list(map(int, input().split()))\nacc = 0\n"
     "for i in range(300000):\n    acc = (acc + i * i) % 1000003\nprint(sum(a) if acc >= 0 else 0)\n", True),
    # functional programs: what == accepts, and interpreter state the program changes
    ("np.array([x])", "average-value", "import numpy as np\nclass Solution:\n    def averageValue(self, nums):\n"
     "        return np.array([sum(nums) / len(nums)])\n", True),
    ("np.array of two", "min-max-pair", "import numpy as np\nclass Solution:\n    def minMax(self, nums):\n"
     "        return np.array([min(nums), max(nums)])\n", False),
    ("Fraction", "average-value", "from fractions import Fraction\nclass Solution:\n"
     "    def averageValue(self, nums):\n        return Fraction(sum(nums), len(nums))\n", True),
    ("Decimal", "average-value", "from decimal import Decimal\nclass Solution:\n    def averageValue(self, nums):\n"
     "        return Decimal(sum(nums)) / len(nums)\n", True),
    ("a generator", "min-max-pair", "class Solution:\n    def minMax(self, nums):\n"
     "        return (x for x in (min(nums), max(nums)))\n", False),
    ("sys.setrecursionlimit(10)", "min-max-pair", "import sys\nclass Solution:\n    def minMax(self, nums):\n"
     "        sys.setrecursionlimit(10)\n        return [x for x in (min(nums), max(nums))]\n", True),
    ("patched builtins", "min-max-pair", "import builtins\nclass Solution:\n    def minMax(self, nums):\n"
     "        r = [min(nums), max(nums)]\n        builtins.isinstance = lambda *a: False\n        builtins.len = None\n"
     "        return r\n", True),
    ("an always-equal object", "min-max-pair", "class Eq:\n    def __eq__(self, other):\n        return True\n"
     "class Solution:\n    def minMax(self, nums):\n        return Eq()\n", True),
]
MORE_IDIOMS = [
    ("input()", "abc301_a", _SUM, True),
    ("open(0).readlines()", "abc301_a", "lines = open(0).readlines()\nprint(sum(map(int, lines[1].split())))\n", False),
    ("from sys import stdin, readline()", "abc301_a",
     "from sys import stdin\nstdin.readline()\nprint(sum(map(int, stdin.readline().split())))\n", True),
    ("from sys import stdin, read()", "abc301_a",
     "from sys import stdin\nprint(sum(map(int, stdin.read().split()[1:])))\n", True),
    ("for line in stdin (from sys)", "abc301_a",
     "from sys import stdin\nlines = [l for l in stdin]\nprint(sum(map(int, lines[1].split())))\n", False),
    ("if __name__ == '__main__' not last", "abc301_a", _SUM_MAIN + "if __name__ == '__main__':\n    main()\nx = 1\n",
     False),
    ("sys.stdin.buffer.readline", "abc301_a",
     "import sys\ninput = sys.stdin.buffer.readline\nn = int(input())\nprint(sum(map(int, input().split())))\n", False),
    ("input = sys.stdin.readline", "abc301_a",
     "import sys\ninput = sys.stdin.readline\nn = int(input())\nprint(sum(map(int, input().split())))\n", True),
    ("readline().rstrip()", "abc301_a", "import sys\nn = int(sys.stdin.readline().rstrip())\n"
     "print(sum(map(int, sys.stdin.readline().rstrip().split())))\n", True),
    ("sys.stdin.readlines()", "abc301_a",
     "import sys\nlines = sys.stdin.readlines()\nprint(sum(map(int, lines[1].split())))\n", True),
    ("sys.stdout.write", "abc301_a",
     "import sys\ninput()\nsys.stdout.write(str(sum(map(int, input().split()))) + '\\n')\n", True),
    ("from sys import stdout", "abc301_a",
     "from sys import stdout\ninput()\nstdout.write(str(sum(map(int, input().split()))) + '\\n')\n", False),
    ("a closure over a top-level list", "abc301_a", "total = [0]\n\ndef add(x):\n    total[0] += x\n\n"
     "n = int(input())\nfor x in input().split():\n    add(int(x))\nprint(total[0])\n", True),
    ("exit()", "abc301_a", _SUM + "exit()\n", True),
    ("sys.exit(0) midway", "abc301_a", "import sys\n" + _SUM + "sys.exit(0)\nprint('after')\n", True),
    ("quit()", "abc301_a", _SUM + "quit()\n", False),
    ("raise SystemExit(3)", "abc301_a", _SUM + "raise SystemExit(3)\n", True),
    ("print(flush=True), os._exit(0)", "abc301_a", "import os\nn = int(input())\n"
     "print(sum(map(int, input().split())), flush=True)\nos._exit(0)\n", False),
    ("a thread with a large stack", "abc301_a", "import sys, threading\n" + _SUM_MAIN.replace("\n\n", "\n")
     + "threading.stack_size(1 << 26)\nt = threading.Thread(target=main)\nt.start()\nt.join()\n", True),
    ("sys.setrecursionlimit(10**6), deep recursion", "abc301_a", "import sys\nsys.setrecursionlimit(10 ** 6)\n"
     "def f(k):\n    return 0 if k == 0 else 1 + f(k - 1)\nn = int(input())\n"
     "print(sum(map(int, input().split())) + f(3000) - 3000)\n", True),
    ("sys.setrecursionlimit(10) in a stdin program", "abc301_a", "import sys\nsys.setrecursionlimit(10)\n"
     "n = int(input())\nprint(sum([int(x) for x in input().split()]))\n", False),
    ("sys.stdout replaced, sys.__stdout__", "abc301_a", "import sys, io\nbuf = io.StringIO()\nsys.stdout = buf\n"
     + _SUM + "sys.__stdout__.write(buf.getvalue())\n", False),
    ("sys.stdout.close()", "abc301_a", "import sys\n" + _SUM + "sys.stdout.close()\n", False),
    ("sys.stdout.flush()", "abc301_a", "import sys\n" + _SUM + "sys.stdout.flush()\n", True),
    ("os.read(0, ...)", "abc301_a", "import os, io\ninput = io.BytesIO(os.read(0, 1 << 20)).readline\n" + _SUM, False),
    ("print(sep)", "abc301_a", "n = int(input())\na = list(map(int, input().split()))\nprint(*[sum(a)], sep='\\n')\n",
     True),
    ("builtins.print replaced after printing", "abc301_a", "import builtins\n_p = builtins.print\nn = int(input())\n"
     "_p(sum(map(int, input().split())))\nbuiltins.print = None\n", False),
    ("from __future__ import", "abc301_a", "from __future__ import annotations\n" + _SUM, False),
    ("lru_cache on a nested function", "abc301_a", "from functools import lru_cache\n@lru_cache(None)\n"
     "def f(k):\n    return k\nn = int(input())\nprint(sum(f(int(x)) for x in input().split()))\n", True),
    ("a syntax error", "abc301_a", "print(\n", False),
    ("only a comment", "abc301_a", "# nothing\n", False),
    ("only an import", "abc301_a", "import sys\n", False),
    ("print to sys.stderr", "abc301_a", "import sys\nn = int(input())\nprint('debug', file=sys.stderr)\n"
     "print(sum(map(int, input().split())))\n", True),
    ("input() past the end", "abc301_a", _SUM + "input()\n", False),
    ("KeyboardInterrupt", "abc301_a", _SUM + "raise KeyboardInterrupt\n", False),
    ("its own TimeoutException", "abc301_a", "class TimeoutException(Exception):\n    pass\n"
     "raise TimeoutException('mine')\n", False),
    ("np.float64", "average-value", "import numpy as np\nclass Solution:\n    def averageValue(self, nums):\n"
     "        return np.float64(sum(nums)) / len(nums)\n", True),
    ("np.mean", "average-value", "import numpy as np\nclass Solution:\n    def averageValue(self, nums):\n"
     "        return np.mean(nums)\n", True),
    ("np.bool_", "is-power-of-two", "import numpy as np\nclass Solution:\n    def isPowerOfTwo(self, n):\n"
     "        return np.bool_(n > 0 and n & (n - 1) == 0)\n", True),
    ("sys.setrecursionlimit(10) at module level", "min-max-pair", "import sys\nsys.setrecursionlimit(10)\n"
     "class Solution:\n    def minMax(self, nums):\n        return [x for x in (min(nums), max(nums))]\n", False),
    ("sys.stdout = None in a call", "min-max-pair", "import sys\nclass Solution:\n    def minMax(self, nums):\n"
     "        sys.stdout = None\n        return [min(nums), max(nums)]\n", True),
    ("a map object", "min-max-pair", "class Solution:\n    def minMax(self, nums):\n"
     "        return map(int, (min(nums), max(nums)))\n", False),
    ("print in a call", "min-max-pair", "class Solution:\n    def minMax(self, nums):\n        print('debug')\n"
     "        return [min(nums), max(nums)]\n", True),
    ("sys.exit in a call", "min-max-pair", "import sys\nclass Solution:\n    def minMax(self, nums):\n"
     "        sys.exit(0)\n", False),
    ("a deque", "min-max-pair", "from collections import deque\nclass Solution:\n    def minMax(self, nums):\n"
     "        return deque([min(nums), max(nums)])\n", False),
    ("from __future__ import (functional)", "min-max-pair", "from __future__ import annotations\nclass Solution:\n"
     "    def minMax(self, nums: list[int]) -> list[int]:\n        return [min(nums), max(nums)]\n", False),
    ("a str subclass", "longest-word", "class S(str):\n    pass\nclass Solution:\n"
     "    def longestWord(self, words):\n        return S(max(words, key=len))\n", True),
]
# fails in both graders, at a test that depends on how deep each one calls the program (the recursion limit counts
# the grader's own frames)
STACK_DEPTH_DEPENDENT = {"sys.setrecursionlimit(10) in a stdin program"}
# where we deliberately differ from the official grader (docs/livecodebench.md): name -> why ours fails
DELIBERATE = {
    "an always-equal object": "a returned value must be plain data: an object's own __eq__ never judges it",
    "a str subclass": "a returned value must be plain data: a subclass of str may carry its own __eq__",
}


def hostile_row(marker: Path) -> dict:
    """A row whose private tests unpickle to ``os.system("touch <marker>")``: refused without running."""
    class Exploit:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    hostile = row("abc999_z", "2025-01-20", "Hostile.", [stdin("1\n", "1\n")], [])
    hostile["private_test_cases"] = base64.b64encode(zlib.compress(pickle.dumps(Exploit()))).decode()
    return hostile


def bomb_row(decompressed_bytes: int) -> dict:
    """A row whose private tests decompress to ``decompressed_bytes`` (a zlib bomb for a smaller cap)."""
    bomb = row("abc998_y", "2025-01-21", "Bomb.", [stdin("1\n", "1\n")], [])
    bomb["private_test_cases"] = base64.b64encode(zlib.compress(b"0" * decompressed_bytes, 9)).decode()
    return bomb


def write_shards(folder: Path, rows: list[dict] = ROWS) -> Path:
    """The six shard files of release_v6 in ``folder``, each row in the shard of its contest year (others empty)."""
    folder.mkdir(parents=True, exist_ok=True)
    shards = {name: [] for name in ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl",
                                    "test6.jsonl")}
    for r in rows:
        shards[SHARD_OF_YEAR[int(r["contest_date"][:4])]].append(r)
    for name, members in shards.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in members))
    return folder


def fenced(program: str, thinking: str = "") -> str:
    """An answer as a chat model writes one: an optional thinking block, prose, the program in a fence."""
    think = f"<think>\n{thinking}\n</think>\n" if thinking else ""
    return f"{think}Here is my solution.\n```python\n{program.rstrip()}\n```\nIt reads the input and prints the answer.\n"
