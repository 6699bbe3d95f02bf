"""Budgets of issue 3 (round-off bounds for PyTorch programs).

* Time: tracked run / plain run at most 1.5x the floor measured in the same run, the floor being
  the plain run plus two float64 matmuls of the same shapes for every matmul-class operation
  (including the two products inside a fused attention kernel; the ratio against the floor
  without them is printed too).
* Memory: peak RSS of the tracked run at most 4x the plain run's (separate processes).
* Tightness: the median ratio of the bound radius to |output - float64 oracle|.

Models: a 4-layer 1024-wide MLP (batch 256) and a transformer block (d=512, seq=256), in float32
and bfloat16. Run: ``python benchmarks/bench_tracking.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# every compiled kernel built before its first call returns (interval/jit.py): otherwise the
# NumPy twins run until the background compilation ends, and a timing that catches them
# measures the warm-up, not the steady state
os.environ.setdefault("FPCHECK_JIT", "eager")

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import pytest_fpcheck as fp


def mlp(dtype: torch.dtype) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    return torch.nn.Sequential(*layers[:-1]).to(dtype).eval(), torch.randn(256, 1024).to(dtype)


class Block(torch.nn.Module):
    def __init__(self, d: int = 512, heads: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


def block(dtype: torch.dtype) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return Block().to(dtype).eval(), torch.randn(1, 256, 512).to(dtype)


MODELS = {"mlp": mlp, "block": block}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


#: fused attention kernels: their two products, q k^T and p v, are matmul-class work too
_ATTENTION = (
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
)


class MatmulShapes(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the operand shapes of every matmul-class operation (for the floor): mm, bmm,
    addmm, baddbmm, and the two products inside a fused attention kernel (q k^T, then the
    attention weights times v), which the plain run computes and tracking must bound."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        self.attention: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = func.overloadpacket.__name__
        if name in ("mm", "bmm", "addmm", "baddbmm"):
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            self.shapes.append((tuple(a.shape), tuple(b.shape)))
        elif name in _ATTENTION:
            q, k, v = args[:3]
            *batch, length, _ = q.shape
            source = k.shape[-2]
            self.attention.append((tuple(q.shape), (*batch, q.shape[-1], source)))
            self.attention.append(((*batch, length, source), tuple(v.shape)))
        return func(*args, **(kwargs or {}))


def interleaved_medians(functions: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median wall time of each function, run in turn within each repeat (a load that changes
    during the run then weighs on all of them alike)."""
    for fn in functions.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, fn in functions.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def measure(name: str, dtype_name: str, repeats: int) -> dict[str, float]:
    model, x = MODELS[name](DTYPES[dtype_name])
    with torch.no_grad():
        recorder = MatmulShapes()
        with recorder:
            model(x)
        operands = [(np.random.rand(*a), np.random.rand(*b)) for a, b in recorder.shapes]
        attention = [(np.random.rand(*a), np.random.rand(*b)) for a, b in recorder.attention]

        def plain() -> None:
            model(x)

        def two_f64_matmuls() -> None:
            for a, b in operands:
                np.matmul(a, b)
                np.matmul(a, b)

        def two_f64_attention_matmuls() -> None:
            for a, b in attention:
                np.matmul(a, b)
                np.matmul(a, b)

        def tracked() -> None:
            with fp.track():
                model(x)

        medians = interleaved_medians(
            {
                "plain": plain,
                "matmuls": two_f64_matmuls,
                "attention": two_f64_attention_matmuls,
                "tracked": tracked,
            },
            repeats,
        )
        t_plain, t_matmuls, t_tracked = medians["plain"], medians["matmuls"], medians["tracked"]
        t_attention = medians["attention"]
        with fp.track():
            out = model(x)
        bounds = fp.bounds_of(out)
        reference = model.to(torch.float64)(x.to(torch.float64)).numpy()
    error = np.abs(bounds.value - reference)
    radius = bounds.radius
    useful = error > 0
    floor = t_plain + t_matmuls + t_attention
    return {
        "tracked_over_floor_without_attention": t_tracked / (t_plain + t_matmuls),
        "plain_s": t_plain,
        "floor_s": floor,
        "tracked_s": t_tracked,
        "tracked_over_plain": t_tracked / t_plain,
        "floor_over_plain": floor / t_plain,
        "tracked_over_floor": t_tracked / floor,
        "median_radius_over_error": float(np.median(radius[useful] / error[useful])),
        "contains_float64_oracle": bool(bounds.contains(reference).all()),
    }


#: the child's peak RSS in KiB: VmHWM where /proc has it, since ru_maxrss survives fork and
#: execve on Linux and would report this (much larger) parent process's peak instead
_PRINT_PEAK_RSS = (
    "import os\n"
    "status = '/proc/self/status'\n"
    "lines = open(status).read().splitlines() if os.path.exists(status) else []\n"
    "hwm = [int(line.split()[1]) for line in lines if line.startswith('VmHWM:')]\n"
    "print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
)


def peak_rss(name: str, dtype_name: str, tracked: bool) -> float:
    code = (
        "import sys, resource; sys.path.insert(0, 'benchmarks'); import bench_tracking as b, torch, pytest_fpcheck as fp\n"
        f"model, x = b.MODELS[{name!r}](b.DTYPES[{dtype_name!r}])\n"
        "with torch.no_grad():\n"
        + ("    with fp.track():\n        model(x)\n" if tracked else "    model(x)\n")
        + _PRINT_PEAK_RSS
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--dtypes", nargs="*", default=list(DTYPES))
    options = parser.parse_args()
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, repeats {options.repeats}, "
        f"load average {os.getloadavg()[0]:.1f} (plain, floor and tracked runs interleaved)"
    )
    print(
        f"{'model':<6} {'dtype':<9} {'plain':>8} {'floor':>8} {'tracked':>8} {'tr/plain':>9} {'tr/floor':>9} {'budget':>7} {'RSS plain':>10} {'RSS tr':>8} {'ratio':>6} {'radius/err':>11} {'tr/floor w/o attn':>18}"
    )
    for name in options.models:
        for dtype_name in options.dtypes:
            r = measure(name, dtype_name, options.repeats)
            rss_plain, rss_tracked = (
                peak_rss(name, dtype_name, False),
                peak_rss(name, dtype_name, True),
            )
            ok = "ok" if r["tracked_over_floor"] <= 1.5 and rss_tracked <= 4 * rss_plain else "OVER"
            print(
                f"{name:<6} {dtype_name:<9} {r['plain_s'] * 1e3:7.1f}ms {r['floor_s'] * 1e3:7.1f}ms {r['tracked_s'] * 1e3:7.1f}ms "
                f"{r['tracked_over_plain']:8.2f}x {r['tracked_over_floor']:8.2f}x {ok:>7} {rss_plain:8.0f}MB {rss_tracked:6.0f}MB "
                f"{rss_tracked / rss_plain:5.2f}x {r['median_radius_over_error']:10.3g} "
                f"{r['tracked_over_floor_without_attention']:17.2f}x"
                + ("" if r["contains_float64_oracle"] else "  ORACLE OUTSIDE")
            )
    print(json.dumps({"note": "ratios: tracked/floor must be <= 1.5, RSS ratio <= 4"}))


if __name__ == "__main__":
    main()
