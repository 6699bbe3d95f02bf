"""Budget of issue 8 (isolation, CIEL).

* Configurations: at most ``2 k ceil(log2 N) + 2 k + 2`` for ``k`` culprit sites among ``N``.
* Time: the whole isolation at most ``(configurations + 1) x 1.2 x`` the plain run of ``fn``.

Model: a residual MLP of ``--blocks`` blocks (Linear, GELU, Linear, residual add, LayerNorm;
width 256, batch 128) in ``--dtype``, with one planted culprit: one block normalises a shifted
input with the variance computed as E[x^2] - E[x]^2 (several sites needed together). The plain
run and the isolation alternate, ``--repeats`` times each, medians reported: the machine's load
hits both. Run: ``python benchmarks/bench_isolate.py [--dtype bfloat16] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from pytest_fpcheck.diagnostics.isolate import isolate

WIDTH, BATCH = 256, 128


class NaiveNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        variance = (x * x).mean(-1, keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(variance + 1e-5)


class Block(torch.nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.up = torch.nn.Linear(WIDTH, WIDTH)
        self.down = torch.nn.Linear(WIDTH, WIDTH)
        self.norm: torch.nn.Module = NaiveNorm() if kind == "naive" else torch.nn.LayerNorm(WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.down(torch.nn.functional.gelu(self.up(x)))
        shift = 64.0 if self.kind == "naive" else 0.0
        return self.norm(x + h + shift)


def model(blocks: int, dtype: torch.dtype) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    kinds = ["plain"] * blocks
    kinds[blocks // 3] = "naive"
    net = torch.nn.Sequential(*(Block(k) for k in kinds)).eval().requires_grad_(False)
    x = torch.randn(BATCH, WIDTH)
    reference = net.double()(x.double())
    return net.to(dtype), x.to(dtype), reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tol", type=float, default=0.1)
    options = parser.parse_args()
    net, x, reference = model(options.blocks, getattr(torch, options.dtype))
    plain_times, isolation_times = [], []
    isolation = isolate(net, x, reference=reference, tol=options.tol)  # warm-up
    for _ in range(options.repeats):
        start = time.perf_counter()
        net(x)
        plain_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        isolation = isolate(net, x, reference=reference, tol=options.tol)
        isolation_times.append(time.perf_counter() - start)
    plain, total = statistics.median(plain_times), statistics.median(isolation_times)
    k, n = len(isolation.sites), len(isolation.program_sites)
    bound = 2 * k * math.ceil(math.log2(n)) + 2 * k + 2
    allowed = (isolation.searches + 1) * 1.2 * plain
    print(f"{options.dtype}, {options.blocks} blocks, width {WIDTH}, batch {BATCH}: {n} sites")
    print(f"outcome: {isolation.outcome}; culprits (k={k}):")
    for site in isolation.sites:
        print(f"  {site} [{site.dtype}]")
    print(f"configurations: {isolation.searches} (budget 2k*ceil(log2 N)+2k+2 = {bound})")
    print(
        f"plain run {plain * 1e3:.1f} ms; isolation {total:.2f} s = "
        f"{total / ((isolation.searches + 1) * plain):.2f} x (configurations + 1) x plain "
        f"(budget 1.2: {allowed:.2f} s)"
    )


if __name__ == "__main__":
    main()
