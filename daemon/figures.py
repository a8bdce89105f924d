"""Summaries of measured figures, shared by everything that reports them: the daemon's status
and trace, `specd bench-daemon` and `specd replay`. No torch, no LSP."""

from __future__ import annotations


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
