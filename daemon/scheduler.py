"""The scheduler: one model worker, and for each document the newest request wins.

The accelerator is serial, so one thread runs the engine, one request at a time, while the
asyncio loop stays free to read frames, answer status and take cancels. A new request for a
document (unless it says `supersede=False`) cancels that document's request in flight at its next
step boundary, through the backend's `cancelled` callback (what it prefilled stays cached), and
drops that document's queued requests with a "cancelled" reply. An explicit Cancel and a client's
disconnect cancel the same way. Every job ends in exactly one call of `finish`.

A request whose answer is kept (daemon/answers.py) is answered at once, without the worker. A
prefetch (the accept branch of a suggestion just shown) waits in a lane of its own that the worker
takes only when no one is waiting: any other request preempts it at its next step boundary, except
the request for that very answer, which waits for it and takes its answer (the Tab it prefetched).

A request answered from a glance (the engine had not read its document's prompt yet:
engine.glance_tokens) leaves a read of that whole prompt in the same lane: a job of the
scheduler's own (client READER, no reply), which any request preempts and a newer prefetch of the
document supersedes; what it computed stays cached, and the next glance asks for it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import msgspec

from specd.daemon import protocol
from specd.daemon.answers import Answers, answer_key
from specd.daemon.backend import Backend
from specd.decoding.request import Completion, CompletionRequest
from specd.decoding.stats import Stats

log = logging.getLogger("specd.scheduler")

Cause = Literal["superseded", "preempted", "cancel", "disconnect", "shutdown"]
READER = -1  # the client of the scheduler's own reads after a glance (connections count from 1)


@dataclass(eq=False)
class Job:
    client: int                          # the connection's number: ids are unique per client
    message: protocol.Complete
    request: CompletionRequest
    received: float = field(default_factory=time.perf_counter)
    cancel: threading.Event = field(default_factory=threading.Event)
    cause: Cause | None = None           # why it was cancelled (the first reason given)
    started: float | None = None         # the worker took it, or it was dropped from the queue
    finished: float | None = None
    passes_at_start: int = 0
    passes_at_cancel: int | None = None  # forward passes counted when the cancel was asked
    passes_at_end: int = 0
    result: Completion | Exception | None = None

    @property
    def key(self) -> tuple[int, int]:
        return self.client, self.message.id

    @property
    def document(self) -> str:
        return self.message.document

    @property
    def prefetch(self) -> bool:
        return self.message.prefetch

    @property
    def read(self) -> bool:
        """The scheduler's own read of a whole prompt after a glance."""
        return self.client == READER

    @cached_property
    def answer(self) -> bytes | None:
        """The key of its answer in the suggestion cache (None: it can have none; a read's one token is no answer)."""
        return None if self.read else answer_key(self.request)


class Scheduler:
    def __init__(self, backend: Backend, finish: Callable[[Job], None], answers: Answers | None = None):
        self.backend, self.finish = backend, finish
        self.answers = Answers() if answers is None else answers
        self.queue: deque[Job] = deque()
        self.spare: deque[Job] = deque()               # prefetches: taken when the queue is empty
        self.jobs: dict[tuple[int, int], Job] = {}   # queued and running
        self.running: Job | None = None
        self.closed = False
        self._wakeup = asyncio.Event()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="specd-model")
        self._reads = itertools.count(1)               # the ids of the scheduler's own reads

    def submit(self, job: Job) -> None:
        assert job.key not in self.jobs, f"request {job.key} is already in flight"
        assert not self.closed, "the scheduler takes no work after close()"
        if not job.prefetch:   # it supersedes its document's older requests and preempts a running prefetch
            self.cancel_where(lambda other: job.message.supersede and other.document == job.document
                              and not self._waits_for(job, other), "superseded")
            self.cancel_where(lambda other: other.prefetch and other is self.running
                              and not self._waits_for(job, other), "preempted")
        elif not job.read:   # the newest prefetch per document (a read, after them, never cancels one)
            self.cancel_where(lambda other: other.prefetch and other.document == job.document, "superseded")
        if self._kept(job):
            self.finish(job)
            return
        self.jobs[job.key] = job
        (self.spare if job.prefetch else self.queue).append(job)
        self._wakeup.set()

    def _waits_for(self, job: Job, other: Job) -> bool:
        """`other` is the running prefetch of `job`'s very answer: `job` waits for it, and takes it."""
        return other.prefetch and other is self.running and job.answer is not None and other.answer == job.answer

    def _kept(self, job: Job) -> bool:
        """Give `job` its answer from the suggestion cache, if it is kept there."""
        if (kept := self.answers.get(job.document, job.answer)) is None:
            return False
        job.started = job.finished = time.perf_counter()
        job.result = kept
        return True

    def cancel(self, key: tuple[int, int], cause: Cause) -> bool:
        """Cancel one job; False if there is none by that key (it may have just finished)."""
        job = self.jobs.get(key)
        if job is not None:
            self._cancel(job, cause)
        return job is not None

    def cancel_where(self, chosen: Callable[[Job], bool], cause: Cause) -> int:
        picked = [job for job in self.jobs.values() if chosen(job)]
        for job in picked:
            self._cancel(job, cause)
        return len(picked)

    def _cancel(self, job: Job, cause: Cause) -> None:
        if job.cause is None:
            job.cause = cause
        if job is self.running:
            if job.passes_at_cancel is None:
                job.passes_at_cancel = self.backend.passes()
            job.cancel.set()        # the backend sees it before its next forward pass
            return
        (self.spare if job.prefetch else self.queue).remove(job)
        del self.jobs[job.key]
        job.started = job.finished = time.perf_counter()
        job.result = Completion("", [], "cancelled", None, Stats())
        self.finish(job)

    def active(self) -> list[protocol.Active]:
        out = []
        if (job := self.running) is not None:
            out.append(protocol.Active(job.message.id, job.document, "running",
                                       self.backend.passes() - job.passes_at_start))
        out += [protocol.Active(job.message.id, job.document, "queued") for job in (*self.queue, *self.spare)]
        return out

    async def run(self) -> None:
        """Feed the worker, one job at a time, until close()."""
        loop = asyncio.get_running_loop()
        while not self.closed:
            if not self.queue and not self.spare:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            job = (self.queue or self.spare).popleft()
            if not self._kept(job):   # kept: a prefetch that ran meanwhile computed it
                # counted before it is published as running, so active() never sees it unset
                job.passes_at_start = self.backend.passes()
                self.running = job
                try:
                    job.result = await loop.run_in_executor(self._worker, self._work, job)
                    self.answers.put(job.document, job.answer, job.result)
                except Exception as error:  # a request the backend refused, or a bug: the reply says so
                    job.result = error
                finally:
                    self.running = None
            del self.jobs[job.key]
            try:
                self.finish(job)
            except Exception:  # a bug in replying or tracing must not stop the worker for everyone
                log.exception("request %s: finishing it failed", job.key)
            self._read_after(job)

    def _read_after(self, job: Job) -> None:
        """If a glance answered `job`, read its document's whole prompt on the idle lane (one
        such read per document at a time): its one token is thrown away, its cache is the point."""
        result = job.result
        if (self.closed or not isinstance(result, Completion) or result.outcome != "done" or not result.stats.glance
                or any(other.read and other.document == job.document for other in self.jobs.values())):
            return
        message = msgspec.structs.replace(job.message, id=next(self._reads), prefetch=True, supersede=False)
        self.submit(Job(READER, message, dataclasses.replace(job.request, glance=False, max_tokens=1)))

    def _work(self, job: Job) -> Completion:
        """On the model thread."""
        job.started = time.perf_counter()
        try:
            return self.backend.complete(job.request, job.cancel.is_set)
        finally:
            job.finished, job.passes_at_end = time.perf_counter(), self.backend.passes()

    async def close(self, runner: asyncio.Task) -> int:
        """Cancel everything (the running job ends at its next step boundary), let `runner`
        (the task of run()) reply to it, then stop the worker. Returns how many were cancelled."""
        cancelled = self.cancel_where(lambda job: True, "shutdown")
        self.closed = True
        self._wakeup.set()
        await runner
        self._worker.shutdown(wait=True)
        return cancelled
