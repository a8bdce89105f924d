"""The scheduler is the same whichever backend serves: a request, the suggestion cache, a newer
request superseding the one in flight, a prefetch preempted. Run on the local engine (tiny
models) and on the server backend (a scripted /v1/completions server, tests/daemon/openai_server.py;
a real llama-server is test_remote_real.py's)."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from specd.daemon import jobs, protocol
from specd.daemon.client import new_request_id
from specd.daemon.config import Config
from specd.daemon.scheduler import Job, Scheduler
from tests.daemon.openai_server import OpenAIServer, Script
from tests.homes import LONG_TEXT, config_text

SERVER = '[backend]\nkind = "server"\nurl = "{url}"\nmodel = "qwen2.5-coder-tiny"\n'


def config(tmp_path, target, draft, server_url: str | None = None) -> Config:
    text = config_text(target, draft).replace("[models]\n", f'[models]\ncache_dir = "{tmp_path}"\n')
    if server_url:
        text += SERVER.format(url=server_url)
    return msgspec.toml.decode(text.encode(), type=Config)


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory, tiny_target, tiny_draft):
    from specd.daemon.local import LocalBackend
    from specd.daemon.runtime import build_engine

    c = config(tmp_path_factory.mktemp("local"), tiny_target, tiny_draft)
    return LocalBackend(build_engine(c, progress=lambda line: None), c), c


@pytest.fixture(params=["local", "server"])
def backend(request, tmp_path, tiny_target, tiny_draft):
    """(backend, config); the server streams 300 pieces 5 ms apart: long enough to cancel."""
    if request.param == "local":
        yield request.getfixturevalue("local_backend")
        return
    from specd.daemon.remote import RemoteBackend

    with OpenAIServer(Script(pieces=[f" x{i}" for i in range(300)], delay_s=0.005)) as server:
        c = config(tmp_path, tiny_target, tiny_draft, server.url)
        yield RemoteBackend(c), c


class Run:
    """A scheduler on `backend` in this event loop, with every finished job kept by id."""

    def __init__(self, backend, config: Config):
        self.config, self.finished = config, {}
        self.scheduler = Scheduler(backend, self.finish)

    def finish(self, job: Job) -> None:
        self.finished[job.message.id] = job

    async def __aenter__(self) -> Run:
        self.task = asyncio.create_task(self.scheduler.run())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.scheduler.close(self.task)

    def submit(self, document: str, max_tokens: int = 8, **fields) -> Job:
        message = protocol.Complete(id=new_request_id(), document=document, prefix=LONG_TEXT, suffix="",
                                    max_tokens=max_tokens, drafter="none", deadline_ms=0, cut_ms=0, **fields)
        job = Job(0, message, jobs.engine_request(message, self.config.completion))
        self.scheduler.submit(job)
        return job

    async def done(self, job: Job, timeout_s: float = 60.0) -> Job:
        for _ in range(int(timeout_s / 0.005)):
            if job.message.id in self.finished:
                return job
            await asyncio.sleep(0.005)
        raise AssertionError(f"request {job.message.id} did not finish")

    async def running(self, job: Job, passes: int = 3) -> None:
        """Until `job` runs and its backend has done `passes` units of work for it."""
        for _ in range(12000):
            if self.scheduler.running is job and self.scheduler.backend.passes() - job.passes_at_start >= passes:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"request {job.message.id} never ran")


async def test_a_request_is_served_and_its_answer_kept(backend):
    async with Run(*backend) as run:
        first = await run.done(run.submit("file:///kept.py"))
        again = await run.done(run.submit("file:///kept.py"))
    assert first.result.outcome == "done" and first.result.text and not first.result.stats.from_cache
    assert again.result.stats.from_cache and again.result.text == first.result.text


async def test_a_newer_request_supersedes_the_one_running(backend):
    async with Run(*backend) as run:
        older = run.submit("file:///burst.py", max_tokens=256)
        await run.running(older)
        newer = run.submit("file:///burst.py", max_tokens=4)
        await run.done(older)
        await run.done(newer)
    assert (older.result.outcome, older.cause) == ("cancelled", "superseded")
    assert older.passes_at_end - older.passes_at_cancel <= 1, "it stopped at its next step"
    assert newer.result.outcome == "done"
    line = jobs.trace_record(older, older.finished)
    assert (line.outcome, line.cause) == ("cancelled", "superseded")


async def test_a_prefetch_is_preempted_by_a_request_and_waited_for_by_its_own(backend):
    async with Run(*backend) as run:
        ahead = run.submit("file:///ahead.py", max_tokens=256, prefetch=True)
        await run.running(ahead)
        other = run.submit("file:///other.py", max_tokens=4)
        await run.done(ahead)
        await run.done(other)
        own = run.submit("file:///own.py", max_tokens=4, prefetch=True)
        await run.running(own, passes=1)
        taker = run.submit("file:///own.py", max_tokens=4)
        await run.done(taker)
    assert (ahead.result.outcome, ahead.cause) == ("cancelled", "preempted")
    assert other.result.outcome == "done"
    assert own.result.outcome == "done" and taker.result.stats.from_cache, "the request took its prefetched answer"
