"""The engine's `Stats` reaches the client's reply, the trace file and `specd status` whole: a
record with every field set comes out of each path equal to what went in. A new field that one
path drops (the crash this record was made against) fails here."""

from __future__ import annotations

import time

import msgspec

from specd.daemon import protocol
from specd.daemon.jobs import reply, trace_record
from specd.daemon.metrics import Metrics
from specd.daemon.scheduler import Job
from specd.daemon.tracing import TraceWriter, read_trace
from specd.decoding.request import Completion, CompletionRequest
from specd.decoding.stats import Stats, Step


def sample(kind, n: int):
    """A value of `kind` unlike its default (and unlike the other fields')."""
    if kind is bool:
        return True
    if kind is int:
        return n
    if kind is float:
        return n + 0.25
    if kind is str:
        return f"drafter{n}"
    if kind == dict[str, int]:
        return {"lookup": n, "draft": n + 1}
    if kind == list[Step]:
        return [every_field_set(Step, n), every_field_set(Step, n + 100)]
    raise AssertionError(f"no sample value for a field of type {kind}: add one here")


def every_field_set(struct: type, start: int = 1):
    return struct(**{f.name: sample(f.type, start + i) for i, f in enumerate(msgspec.structs.fields(struct))})


def finished_job(stats: Stats) -> Job:
    message = protocol.Complete(id=7, document="file:///a.py", prefix="x = ")
    job = Job(client=1, message=message, request=CompletionRequest(prefix="x = ", document=message.document))
    job.started = job.received + 0.001
    job.finished = job.started + 0.002
    job.result = Completion("1", [16], "done", "max_tokens", stats)
    return job


def test_every_field_is_set_and_differs_from_its_default():
    stats = every_field_set(Stats)
    for f in msgspec.structs.fields(Stats):
        default = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
        assert getattr(stats, f.name) != default, f.name


def test_the_reply_carries_the_engine_record_whole():
    stats = every_field_set(Stats)
    frame = protocol.pack(reply(finished_job(stats)))
    decoded = protocol.decode_reply(frame[protocol.HEADER.size:])
    assert isinstance(decoded, protocol.Completion)
    assert decoded.stats == stats


def test_the_trace_line_and_the_status_totals_carry_it_whole(tmp_path):
    stats = every_field_set(Stats)
    line = trace_record(finished_job(stats), time.perf_counter())
    TraceWriter(tmp_path / "trace.jsonl", 1 << 20).write(line)
    (read,) = read_trace(tmp_path / "trace.jsonl")
    assert read.stats == stats and read == line
    metrics = Metrics()
    metrics.add(read)
    assert dict(metrics.proposed) == stats.proposed and dict(metrics.accepted) == stats.accepted
