"""What a caller asks of the engine and gets back: `CompletionRequest`, its `Sampler`, the
`Completion`, and `RequestError` for a request the engine cannot serve as asked. Torch-free: the
daemon builds requests from messages without loading the engine's libraries."""

from __future__ import annotations

from dataclasses import dataclass, field

from specd.decoding.errors import UserError
from specd.decoding.registry import DEFAULT_DRAFTER
from specd.decoding.stats import Stats


class RequestError(UserError):
    """A request the engine cannot serve as asked (an unknown drafter, a bad limit)."""


@dataclass(frozen=True)
class Sampler:
    """Temperature and top-p sampling; temperature 0 means greedy (decoding/verify.py samples)."""
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass(frozen=True)
class CompletionRequest:
    prefix: str
    suffix: str = ""
    document: str = "untitled"
    extras: tuple[tuple[str, str], ...] = ()   # (path, text) of other open files
    max_tokens: int = 48
    single_line: bool = False
    sampler: Sampler = Sampler()
    deadline_s: float | None = None            # seconds from the start of decoding: then end at a line end
    cut_s: float | None = None                 # seconds from the start of decoding: then end at a word end
    drafter: str = DEFAULT_DRAFTER
    stop_at_suffix: bool = True                # end where the completion repeats the suffix
    hints: tuple[str, ...] = ()                # likely continuations (a suggestion being typed
                                               # through): lookup sources only, always verified
    reuse: bool = True                         # False: start from a cold cache (for comparisons)
    suffix_tokens: int | None = None           # this request's suffix budget (at most the engine's)
    glance: bool = False                       # may be answered from a glance where the prompt is not yet
                                               # read (engine.glance_tokens; the daemon's requests may)


@dataclass
class Completion:
    text: str
    tokens: list[int]
    outcome: str                   # "done" or "cancelled"
    stop_reason: str | None
    stats: Stats = field(default_factory=Stats)
    error: str | None = None       # why there is no text: the backend could not serve it (an
                                   # inference server down or failing); the trace says it, and
                                   # the editor gets an empty answer, never kept
