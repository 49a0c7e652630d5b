"""How steady is this machine's CPU? Times one fixed single-threaded computation (a chain of small matrix products,
the size of the embedded model's) again and again, and prints the spread of wall time and of the thread's CPU time.

    python scripts/machine_noise.py [--repeats 30] [--steps 3000]

Equal CPU and wall time with a wide spread means the core itself ran at varying speed (frequency, a neighbour on a
shared core or cache), not that something else took it: no timing protocol removes that from a single measurement,
and the speed stage's A/A control (docs/speed.md) shows it as a wide interval around 1.
"""

import argparse
import statistics
import time

import torch


def work(weight: torch.Tensor, x: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        x = torch.tanh(x @ weight)
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    weight, x = torch.randn(96, 96, generator=generator), torch.randn(8, 96, generator=generator)
    work(weight, x, args.steps)  # warm-up
    wall, cpu = [], []
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        work(weight, x, args.steps)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    for name, values in (("wall", wall), ("thread CPU", cpu)):
        values = sorted(values)
        print(f"{name:>10}: min {values[0] * 1e3:.1f} ms, median {statistics.median(values) * 1e3:.1f} ms, "
              f"max {values[-1] * 1e3:.1f} ms (max/min {values[-1] / values[0]:.2f})")
    pairs = [wall[i] / wall[i + 1] for i in range(0, len(wall) - 1, 2)]
    print(f"back-to-back pairs, wall ratio: {min(pairs):.2f} to {max(pairs):.2f}")


if __name__ == "__main__":
    main()
