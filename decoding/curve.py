"""What a pass costs on this machine, by its width: the record the drafting policy reads.

A target pass of 16 rows costs six times one of 1 on a 2-core AVX2 CPU with torch's int4 kernel,
and little more than one of 1 on an AVX-512 CPU; so how many drafted tokens to verify depends on
the machine, and no fixed width suits every one. `decoding/measure.py` times the loaded models
at every width once (models/curves.py keeps the result per machine); decoding/policy.py turns it
into the costs its rules weigh.

Torch-free: the daemon's status message carries it, and clients decode that without the engine.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Ms = Annotated[float, msgspec.Meta(gt=0)]
SHOWN = (1, 2, 4, 8, 16, 32, 64)  # the widths a one-line summary names, where measured


class CostCurve(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Milliseconds per pass by width: `target_ms[w - 1]` is a target pass of w rows over a cache
    of a typical prompt's length; `draft_ms[w - 1]` a draft-model step of w tokens (empty where
    no draft model is loaded)."""
    target_ms: Annotated[tuple[Ms, ...], msgspec.Meta(min_length=1)]
    draft_ms: tuple[Ms, ...] = ()
    measured_s: float = 0.0           # how long measuring took
    cpu_share: float = 1.0            # of its threads' time, the share the process got while measuring a CPU:
                                      # well under 1 where other work took the cores (the times are then inflated)

    @property
    def widest(self) -> int:
        return len(self.target_ms)

    def summary(self) -> str:
        """One line: "target 1:95 2:97 4:110 8:180 16:330; draft 1:30 2:31 ..." (ms, a few widths)."""
        parts = [f"target {_some(self.target_ms)}"]
        if self.draft_ms:
            parts.append(f"draft {_some(self.draft_ms)}")
        return "; ".join(parts)


def _some(ms: tuple[float, ...]) -> str:
    widths = [w for w in SHOWN if w <= len(ms)]
    if widths[-1] != len(ms):
        widths.append(len(ms))
    return " ".join(f"{w}:{ms[w - 1]:.0f}" for w in widths)
