"""What the daemon needs of whatever computes its completions: one typed protocol.

The scheduler, the server's replies and `specd status` talk to a `Backend` only, never to the
engine behind it, so that the models may run in this process (daemon/local.py: the torch engine)
or at an inference server (daemon/remote.py: llama.cpp's server, vLLM, SGLang), and everything in
front of the model (newest-wins cancellation, the suggestion cache, the prefetch lane, traces)
works the same either way. Torch-free: the server backend never loads an engine library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

from specd.decoding.curve import CostCurve
from specd.decoding.request import Completion, CompletionRequest


class Described(msgspec.Struct, frozen=True):
    """What `specd status` shows of a backend (the fields of protocol.Status it fills)."""
    target: str                       # the model that writes the completions
    draft: str                        # the draft model, or why there is none
    device: str                       # where it runs: "cpu", "cuda:0", or the server's URL
    dtype: str
    device_reason: str                # why there; for a server, whether it answers and, if not, why
    cache_mb: float = 0.0             # KV caches this process holds for documents
    cache_documents: int = 0
    curve: CostCurve | None = None    # ms per pass by width, where this process measured one


class Backend(Protocol):
    """One engine as the daemon sees it. `complete` runs on the scheduler's worker thread, one
    request at a time; everything else is called from the daemon's event loop."""

    def complete(self, request: CompletionRequest, cancelled: Callable[[], bool]) -> Completion:
        """The completion of `request`. `cancelled()` is polled between units of work (forward
        passes, streamed chunks); once it is true the backend stops and answers "cancelled"."""
        ...

    def passes(self) -> int:
        """Units of model work begun so far, a counter that only grows (forward passes of either
        model here; tokens streamed from a server), so how far a cancel lands is a count."""
        ...

    def describe(self) -> Described:
        ...

    def close(self) -> None:
        """Let go of what it holds (connections); the daemon is stopping."""
        ...
