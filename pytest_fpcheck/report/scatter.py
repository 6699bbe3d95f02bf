"""A verdict's plot: each element's ``|actual - expected|`` against its enclosure radius, as a
small SVG scatter on log-log axes (no plotting library: the page embeds the markup itself)."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["scatter_svg"]

_PLOT_WIDTH, _PLOT_HEIGHT, _LEFT, _BOTTOM, _TOP, _RIGHT = 300, 240, 46, 34, 10, 12


def scatter_svg(points: Sequence[Sequence[float]], total: int | None = None) -> str:
    """``|actual - expected|`` against the enclosure radius, per element, on log-log axes of
    one range (so the dashed diagonal is where the difference equals the radius); elements
    outside the enclosure as red crosses, the others as green dots; a zero on either axis sits
    on that axis' edge. ``points`` are ``[radius, difference, outside]``."""
    positive = [v for point in points for v in point[:2] if v > 0]
    if not positive:
        return ""
    low = math.floor(math.log10(min(positive)))
    high = max(math.ceil(math.log10(max(positive))), low + 1)
    inner_w = _PLOT_WIDTH - _LEFT - _RIGHT
    inner_h = _PLOT_HEIGHT - _TOP - _BOTTOM

    def x(value: float) -> float:
        exponent = math.log10(value) if value > 0 else low
        return _LEFT + (exponent - low) / (high - low) * inner_w

    def y(value: float) -> float:
        exponent = math.log10(value) if value > 0 else low
        return _TOP + inner_h - (exponent - low) / (high - low) * inner_h

    step = max(1, math.ceil((high - low) / 6))
    ticks = []
    for exponent in range(low, high + 1, step):
        px, py = x(10.0**exponent), y(10.0**exponent)
        ticks.append(
            f'<text x="{px:.0f}" y="{_PLOT_HEIGHT - _BOTTOM + 13}" text-anchor="middle">'
            f"1e{exponent}</text>"
            f'<text x="{_LEFT - 4}" y="{py + 4:.0f}" text-anchor="end">1e{exponent}</text>'
            f'<path d="M{_LEFT} {py:.0f}h{inner_w}M{px:.0f} {_TOP}v{inner_h}" stroke="#eef0f2"/>'
        )
    inside = "".join(
        f"M{x(r):.1f} {y(d):.1f}h0" for r, d, outside in points if not outside
    )  # round caps draw a dot
    crosses = "".join(
        f"M{x(r) - 3:.1f} {y(d) - 3:.1f}l6 6m0 -6l-6 6" for r, d, outside in points if outside
    )
    shown = f"{len(points)} of {total} elements" if total else f"{len(points)} elements"
    return (
        f'<svg class="plot" role="img" width="{_PLOT_WIDTH}" height="{_PLOT_HEIGHT}" '
        f'viewBox="0 0 {_PLOT_WIDTH} {_PLOT_HEIGHT}" font-size="10" '
        f'font-family="system-ui, sans-serif" fill="#5c6670">'
        f"<title>|actual - expected| against the enclosure radius, {shown}; "
        f"red crosses lie outside the enclosure</title>{''.join(ticks)}"
        f'<rect x="{_LEFT}" y="{_TOP}" width="{inner_w}" height="{inner_h}" fill="none" '
        f'stroke="#5c6670"/>'
        f'<path d="M{x(10.0**low):.0f} {y(10.0**low):.0f}L{x(10.0**high):.0f} '
        f'{y(10.0**high):.0f}" stroke="#5c6670" stroke-dasharray="4 3"/>'
        f'<path d="{inside}" stroke="#1a7f37" stroke-width="5" stroke-linecap="round" '
        f'stroke-opacity="0.6"/>'
        f'<path d="{crosses}" stroke="#b3261e" stroke-width="1.6"/>'
        f'<text x="{_LEFT + inner_w / 2:.0f}" y="{_PLOT_HEIGHT - 4}" text-anchor="middle">'
        f"enclosure radius</text>"
        f'<text transform="translate(11 {_TOP + inner_h / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">|actual - expected|</text></svg>'
    )
