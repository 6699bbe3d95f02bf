"""The figure of a dual-delta result (Dual-Delta paper, section 4.2, "Visualization").

One PNG with four panels, custom in blue and reference in orange as in the paper's figures:

* overlaid histograms with shared bins on a common error axis, which shows the shape, the
  spread and the overlap of the two distributions;
* box plots: quartiles and outliers side by side;
* a Q-Q plot of the custom quantiles against the reference ones at up to 512 levels, with the
  diagonal: points off the diagonal mean differently shaped distributions;
* the paired scatter Delta_c[i] against Delta_r[i] with the diagonal: points above it are
  inputs on which the custom implementation erred more.

Every error axis is log-scaled, with logarithmic bins, when the positive errors span a factor of
10 or more -- as soon as one implementation is clearly worse. Errors of exactly zero cannot sit
on a log axis: they are drawn at half the smallest positive error (the legend says how many).
Within a narrower range the axes stay linear, where a log scale would show nothing more and its
tick labels would pile up.

matplotlib is imported here only, and drawn with its Agg canvas directly, so the caller's
pyplot backend and state are left alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import FPCheckError, InvalidArgument

__all__ = ["plot_result"]

Array = NDArray[np.float64]
CUSTOM_COLOUR = "tab:blue"
REFERENCE_COLOUR = "tab:orange"
_QQ_LEVELS = 512
_BINS = 60
_LOG_SPAN = 10.0


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise FPCheckError(
            "DualDeltaResult.plot needs matplotlib, which is not installed: "
            "pip install pytest-fpcheck[plot]"
        ) from error
    return Figure, FigureCanvasAgg


@dataclass(frozen=True)
class _Axis:
    """How errors are drawn: on a log scale (``log``), zeros moved up to ``floor``."""

    log: bool
    floor: float

    def place(self, values: Array) -> Array:
        shown: Array = np.maximum(values, self.floor) if self.log else values
        return shown


def _axis(custom: Array, reference: Array) -> _Axis:
    """Log scale when the positive errors span at least ``_LOG_SPAN``; zeros then sit at half
    the smallest positive error."""
    both = np.concatenate([custom, reference])
    positive = both[both > 0]
    if positive.size == 0 or positive.max() < _LOG_SPAN * positive.min():
        return _Axis(log=False, floor=0.0)
    smallest = float(positive.min())
    return _Axis(log=True, floor=smallest / 2 if positive.size < both.size else smallest)


def _set_scale(ax: Any, axis: _Axis, *, x: bool, y: bool) -> None:
    """Log-scale the error axes, or give linear ones a shared power-of-ten offset."""
    for on, name in ((x, "x"), (y, "y")):
        if not on:
            continue
        if axis.log:
            getattr(ax, f"set_{name}scale")("log")
        else:
            ax.ticklabel_format(axis=name, style="sci", scilimits=(-2, 3))


def _histograms(ax: Any, custom: Array, reference: Array, axis: _Axis) -> None:
    both = np.concatenate([custom, reference])
    high = float(both.max())
    if axis.log:
        bins: Any = np.geomspace(axis.floor, high, _BINS + 1)
    else:
        bins = np.linspace(float(both.min()), high, _BINS + 1) if high > both.min() else _BINS
    _set_scale(ax, axis, x=True, y=False)
    for values, name, colour in (
        (custom, "custom", CUSTOM_COLOUR),
        (reference, "reference", REFERENCE_COLOUR),
    ):
        zeros = int(np.count_nonzero(values == 0))
        label = f"{name} ({zeros} zeros at left edge)" if axis.log and zeros else name
        ax.hist(axis.place(values), bins=bins, alpha=0.5, color=colour, label=label)
    ax.set_xlabel("error")
    ax.set_ylabel("trials")
    ax.set_title("error distributions")
    ax.legend()


def _boxes(ax: Any, custom: Array, reference: Array, axis: _Axis) -> None:
    parts = ax.boxplot([axis.place(custom), axis.place(reference)], patch_artist=True)
    for box, colour in zip(parts["boxes"], (CUSTOM_COLOUR, REFERENCE_COLOUR), strict=True):
        box.set_facecolor(colour)
        box.set_alpha(0.5)
    ax.set_xticks([1, 2], ["custom", "reference"])
    _set_scale(ax, axis, x=False, y=True)
    ax.set_ylabel("error")
    ax.set_title("box plot")


def _diagonal(ax: Any, low: float, high: float) -> None:
    ax.plot([low, high], [low, high], color="black", linewidth=1, zorder=1)


def _qq(ax: Any, custom: Array, reference: Array, axis: _Axis) -> None:
    levels = np.linspace(0.0, 1.0, min(custom.size, _QQ_LEVELS))
    x = axis.place(np.quantile(reference, levels))
    y = axis.place(np.quantile(custom, levels))
    _set_scale(ax, axis, x=True, y=True)
    ax.plot(x, y, ".", color=CUSTOM_COLOUR, markersize=3, zorder=2)
    _diagonal(ax, float(min(x.min(), y.min())), float(max(x.max(), y.max())))
    ax.set_xlabel("reference quantile")
    ax.set_ylabel("custom quantile")
    ax.set_title("Q-Q plot")


def _scatter(ax: Any, custom: Array, reference: Array, axis: _Axis) -> None:
    x, y = axis.place(reference), axis.place(custom)
    _set_scale(ax, axis, x=True, y=True)
    ax.plot(x, y, ".", color=CUSTOM_COLOUR, markersize=2, alpha=0.4, zorder=2)
    _diagonal(ax, float(min(x.min(), y.min())), float(max(x.max(), y.max())))
    above = int(np.count_nonzero(custom > reference))
    ax.set_xlabel("reference error")
    ax.set_ylabel("custom error")
    ax.set_title(f"paired errors ({above} of {custom.size} above the diagonal)")


def plot_result(custom: Array, reference: Array, title: str, path: str | os.PathLike[str]) -> Path:
    """Draw the four panels (module docstring) of the paired errors ``custom`` and
    ``reference`` under ``title`` into the PNG file ``path``."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgument("path", path, "a file path (str or os.PathLike) for the PNG")
    figure_class, canvas_class = _matplotlib()
    figure = figure_class(figsize=(11, 8.5))
    figure.subplots_adjust(left=0.08, right=0.98, bottom=0.07, top=0.88, wspace=0.22, hspace=0.32)
    canvas_class(figure)
    axes = figure.subplots(2, 2)
    axis = _axis(custom, reference)
    _histograms(axes[0, 0], custom, reference, axis)
    _boxes(axes[0, 1], custom, reference, axis)
    _qq(axes[1, 0], custom, reference, axis)
    _scatter(axes[1, 1], custom, reference, axis)
    figure.suptitle(title)
    target = Path(path)
    figure.savefig(target, format="png", dpi=100)
    return target
