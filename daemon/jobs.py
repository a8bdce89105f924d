"""What the daemon makes of a Complete message and of a finished job: the engine's request (with
the config's [completion] defaults), the job's one reply, and its trace line."""

from __future__ import annotations

import time

from specd.daemon import protocol
from specd.daemon.config import CompletionSettings
from specd.daemon.scheduler import Job
from specd.daemon.tracing import ENGINE_PHASES, TraceRecord
from specd.decoding.request import Completion, CompletionRequest, RequestError, Sampler
from specd.decoding.stats import Stats


def engine_request(message: protocol.Complete, defaults: CompletionSettings) -> CompletionRequest:
    """RequestError says what is wrong with the message."""
    try:
        prefix, suffix = message.split()
    except ValueError as error:
        raise RequestError(str(error)) from None
    pick = lambda value, default: default if value is None else value  # noqa: E731
    deadline_ms = pick(message.deadline_ms, defaults.first_line_ms)
    cut_ms = pick(message.cut_ms, defaults.cut_ms)
    return CompletionRequest(
        prefix=prefix, suffix=suffix, document=message.document,
        extras=tuple((e.path, e.text) for e in message.extras),
        max_tokens=pick(message.max_tokens, defaults.max_tokens),
        single_line=message.single_line,
        sampler=Sampler(pick(message.temperature, defaults.temperature), pick(message.top_p, defaults.top_p),
                        message.seed),
        deadline_s=deadline_ms / 1e3 if deadline_ms else None, cut_s=cut_ms / 1e3 if cut_ms else None,
        drafter=pick(message.drafter, defaults.drafter),
        hints=tuple(message.hints), reuse=message.reuse, suffix_tokens=message.suffix_tokens,
        glance=True)   # someone waits: a place not yet read is answered from a glance first


def reply(job: Job) -> protocol.CompletionReply | protocol.Error:
    result = job.result
    if not isinstance(result, Completion):
        assert isinstance(result, Exception), f"a finished job holds a result, not {result!r}"
        return protocol.Error(job.message.id, error_code(result), str(result))
    assert job.started is not None, "a finished job was started or dropped"
    return protocol.CompletionReply(job.message.id, result.text, result.outcome, result.stop_reason,
                               (job.started - job.received) * 1e3, result.stats)


def error_code(error: Exception) -> str:
    return "bad_request" if isinstance(error, RequestError) else "internal"


def trace_record(job: Job, replied: float) -> TraceRecord:
    """The trace line of a finished job whose reply was written at `replied` (perf_counter)."""
    assert job.started is not None and job.finished is not None, "a finished job has its times"
    result = job.result
    done = isinstance(result, Completion)
    stats = result.stats if done else Stats()    # an error: no engine phases, all "other"
    ms = lambda a, b: (b - a) * 1e3  # noqa: E731
    engine_ms = sum(getattr(stats, f"{phase}_ms") for phase in ENGINE_PHASES)
    # a backend that could not serve (an inference server down) answered empty: an error here
    outcome = "error" if not done or result.error else result.outcome
    return TraceRecord(
        id=job.message.id, client=job.client, document=job.document, language=job.message.language,
        drafter=job.request.drafter, received_at=time.time() - ms(job.received, replied) / 1e3,
        outcome=outcome, cause=job.cause if outcome == "cancelled" else None,
        error=result.error if done else str(result), stop_reason=result.stop_reason if done else None,
        queue_ms=ms(job.received, job.started), other_ms=ms(job.started, job.finished) - engine_ms,
        reply_ms=ms(job.finished, replied), total_ms=ms(job.received, replied),
        passes=job.passes_at_end - job.passes_at_start,
        passes_after_cancel=None if job.passes_at_cancel is None else job.passes_at_end - job.passes_at_cancel,
        stats=stats, prefetch=job.prefetch)
