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
    assert isinstance(decoded, protocol.CompletionReply)
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


def test_the_status_carries_the_cost_curve_whole():
    """(`specd status` prints its summary: tests/daemon/test_lifecycle.py.)"""
    from specd.decoding.curve import CostCurve

    curve = CostCurve(tuple(100.0 + w for w in range(16)), tuple(30.0 + w / 4 for w in range(16)), 12.5)
    status = protocol.Status(id=3, pid=1, version="v", uptime_s=1.0, target="t", draft="d", device="cpu",
                             dtype="bfloat16", socket="s", tcp_port=0, rss_mb=1.0, cache_mb=0.0, cache_documents=0,
                             served=0, cancelled=0, errors=0, reuse=None, acceptance={}, p50_ms=None, p95_ms=None,
                             forward_passes=0, curve=curve)
    decoded = protocol.decode_reply(protocol.pack(status)[protocol.HEADER.size:])
    assert decoded == status and decoded.curve == curve
    assert decoded.curve.summary() == "target 1:100 2:101 4:103 8:107 16:115; draft 1:30 2:30 4:31 8:32 16:34"
