"""The daemon's asyncio side: connections, the handshake, one handler per message type, replies.

Nothing a client sends can stop the server: a frame that is too large, malformed or of an unknown
type gets an Error reply and the connection reads on; a refused handshake closes only that
connection. Completions go to the scheduler, whose `finish` writes each job's one reply, its trace
line and the status totals.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import os
import resource
import time
from dataclasses import dataclass, field
from functools import partial

from specd.daemon import jobs, protocol
from specd.daemon.backend import Backend
from specd.daemon.config import Config
from specd.daemon.metrics import Metrics
from specd.daemon.paths import Paths
from specd.daemon.protocol import Cancel, Complete, Error, Feedback, GetStatus, Hello, Shutdown
from specd.daemon.scheduler import Job, Scheduler
from specd.daemon.tracing import TraceWriter, UptakeRecord
from specd.decoding.request import RequestError

log = logging.getLogger("specd.server")
HELLO_MAX_BYTES = 4096   # a Hello is a few dozen bytes; before it, no frame may be larger


@dataclass(eq=False)
class Connection:
    number: int
    writer: asyncio.StreamWriter
    tcp: bool
    greeted: bool = False
    refused: bool = False            # a handshake refused: read no more, close once replies are out
    peer: str = field(default="")
    opened: float = field(default_factory=time.monotonic)

    def send(self, message: protocol.Message) -> None:
        if not self.writer.is_closing():   # a reply to a client that left goes nowhere
            self.writer.write(protocol.pack(message))


class Server:
    def __init__(self, config: Config, backend: Backend, paths: Paths, token: str | None):
        self.config, self.backend, self.paths, self.token = config, backend, paths, token
        self.scheduler = Scheduler(backend, self.finish)
        self.metrics = Metrics()
        self.tracer = TraceWriter(paths.trace, config.daemon.trace_max_mb << 20) if config.daemon.trace else None
        self.connections: dict[int, Connection] = {}
        self.numbers = itertools.count(1)
        self.started = time.monotonic()
        self.stopping = asyncio.Event()

    async def serve(self, ready) -> int:
        """Listen, call `ready()`, serve until Shutdown or stop(); returns requests cancelled on the way out.
        OSError if it cannot listen (a TCP port in use)."""
        servers = await self.listen()
        runner = asyncio.create_task(self.scheduler.run(), name="scheduler")
        ready()
        await self.stopping.wait()
        log.info("shutting down: cancelling %d requests", len(self.scheduler.jobs))
        for server in servers:
            server.close()
        cancelled = await self.scheduler.close(runner)
        self.backend.close()
        for conn in list(self.connections.values()):
            conn.writer.close()
        self.paths.socket.unlink(missing_ok=True)
        return cancelled

    async def listen(self) -> list[asyncio.Server]:
        old = os.umask(0o177)   # the socket is born 0600; its folder is 0700 as well
        try:
            servers = [await asyncio.start_unix_server(partial(self.connection, tcp=False), path=self.paths.socket)]
        finally:
            os.umask(old)
        os.chmod(self.paths.socket, 0o600)
        if self.config.daemon.tcp_port:
            try:
                servers.append(await asyncio.start_server(partial(self.connection, tcp=True), host="127.0.0.1",
                                                          port=self.config.daemon.tcp_port))
            except OSError:
                servers[0].close()
                self.paths.socket.unlink(missing_ok=True)
                raise
        return servers

    def stop(self) -> None:
        self.stopping.set()

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tcp: bool) -> None:
        conn = Connection(next(self.numbers), writer, tcp, peer=str(writer.get_extra_info("peername") or "unix"))
        self.connections[conn.number] = conn
        log.debug("connection %d from %s", conn.number, conn.peer)
        try:
            while not writer.is_closing() and not conn.refused:
                try:
                    body = await self.next_frame(conn, reader)
                except protocol.FrameTooLarge as error:
                    self.refuse(conn, Error(None, "frame_too_large", str(error)))
                    if not conn.greeted:      # a stranger's large frame is not read on
                        break
                    continue
                except TimeoutError:
                    log.info("connection %d: no hello within %d s; closed", conn.number,
                             self.config.daemon.handshake_timeout_s)
                    break
                try:
                    self.handle(conn, body)
                except Exception:             # a bug costs this message its answer, not the daemon
                    log.exception("connection %d: handling a message failed", conn.number)
                    self.refuse(conn, Error(None, "internal", "the daemon failed on this message; see its log"))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass                              # the client went away, mid-frame or between frames
        finally:
            if n := self.scheduler.cancel_where(lambda job: job.client == conn.number, "disconnect"):
                log.info("connection %d closed: cancelled %d requests", conn.number, n)
                if conn.refused:              # the client is still there, and owed their replies
                    await self.replied(conn)
            del self.connections[conn.number]
            writer.close()

    async def replied(self, conn: Connection, timeout_s: float = 10.0) -> None:
        """Until the connection's cancelled jobs have replied (the running one stops at its next
        pass): a client refused mid-connection still gets an answer to every request it sent."""
        deadline = time.monotonic() + timeout_s
        while any(job.client == conn.number for job in self.scheduler.jobs.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        try:
            await conn.writer.drain()
        except ConnectionError:
            pass                              # the client left: the replies go nowhere

    async def next_frame(self, conn: Connection, reader: asyncio.StreamReader) -> bytes:
        """The next frame's body. Until the handshake, frames are capped at HELLO_MAX_BYTES and the
        Hello must come within daemon.handshake_timeout_s of connecting (TimeoutError): a stranger
        on loopback holds neither a full-size frame nor a connection for long."""
        if conn.greeted:
            return await protocol.read_frame(reader, self.config.daemon.max_frame_bytes)
        left = conn.opened + self.config.daemon.handshake_timeout_s - time.monotonic()
        return await asyncio.wait_for(protocol.read_frame(reader, HELLO_MAX_BYTES), max(0.0, left))

    def handle(self, conn: Connection, body: bytes) -> None:
        message = protocol.decode_request(body)
        match message:
            case Error():
                self.refuse(conn, message)
            case Hello():
                self.greet(conn, message)
            case _ if not conn.greeted:
                self.refuse(conn, Error(getattr(message, "id", None), "handshake",
                                        "send hello (the version handshake) first"))
            case Complete():
                self.complete(conn, message)
            case Cancel():
                self.scheduler.cancel((conn.number, message.id), "cancel")
            case Feedback():
                self.took(conn, message)
            case GetStatus():
                conn.send(self.status(message.id))
            case Shutdown():
                conn.send(protocol.ShuttingDown(message.id, len(self.scheduler.jobs)))
                self.stop()

    def took(self, conn: Connection, report: Feedback) -> None:
        """A report on a suggestion shown: into the totals, and into the trace beside its request."""
        self.metrics.feedback(report)
        if self.tracer is not None:
            self.tracer.write(UptakeRecord(time.time(), conn.number, report.request, report.event, report.chars,
                                           report.first, report.language, report.how))

    def refuse(self, conn: Connection, error: Error) -> None:
        log.info("connection %d: %s: %s", conn.number, error.code, error.message)
        self.metrics.refused()
        conn.send(error)

    def greet(self, conn: Connection, hello: Hello) -> None:
        if hello.version != protocol.VERSION:
            self.refuse(conn, Error(None, "version", f"this daemon speaks protocol version {protocol.VERSION}, "
                                    f"the client {hello.version}; restart the daemon (`specd stop`)"))
            conn.refused = True
        elif conn.tcp and not hmac.compare_digest(hello.token.encode(), (self.token or "").encode()):
            self.refuse(conn, Error(None, "unauthorized", "TCP clients must send the token from the token file"))
            conn.refused = True
        else:
            conn.greeted = True
            log.debug("connection %d is %s", conn.number, hello.client or "a client")
            conn.send(protocol.Welcome(protocol.VERSION, os.getpid(), self.config.daemon.max_frame_bytes))

    def complete(self, conn: Connection, message: Complete) -> None:
        if self.stopping.is_set():
            return self.refuse(conn, Error(message.id, "shutting_down", "the daemon is shutting down"))
        if (conn.number, message.id) in self.scheduler.jobs:
            return self.refuse(conn, Error(message.id, "duplicate_id", f"request {message.id} is already in flight"))
        try:
            request = jobs.engine_request(message, self.config.completion)
        except RequestError as error:
            return self.refuse(conn, Error(message.id, "bad_request", str(error)))
        self.scheduler.submit(Job(conn.number, message, request))

    def finish(self, job: Job) -> None:
        """The scheduler is done with `job`: its one reply, its trace line, the totals."""
        if (conn := self.connections.get(job.client)) is not None:
            try:
                reply = jobs.reply(job)
            except Exception as error:  # a bug in building the reply: the client still gets one
                log.exception("request %d: cannot build its reply", job.message.id)
                reply = Error(job.message.id, "internal", f"cannot build the reply: {error}")
            conn.send(reply)
        line = jobs.trace_record(job, time.perf_counter())
        self.metrics.add(line)
        if line.outcome == "error":
            log.warning("request %d (%s) failed: %s", job.message.id, job.document, line.error,
                        exc_info=job.result if jobs.error_code(job.result) == "internal" else None)
        if self.tracer is not None:
            self.tracer.write(line)           # a full disk costs the trace (said once), not the daemon

    def status(self, request_id: int) -> protocol.Status:
        b, m = self.backend.describe(), self.metrics
        return protocol.Status(
            id=request_id, pid=os.getpid(), version=protocol.package_version(),
            uptime_s=time.monotonic() - self.started,
            target=b.target, draft=b.draft, device=b.device, dtype=b.dtype,
            socket=str(self.paths.socket), tcp_port=self.config.daemon.tcp_port, rss_mb=rss_mb(),
            cache_mb=b.cache_mb, cache_documents=b.cache_documents,
            served=m.served, cancelled=m.cancelled, errors=m.errors, reuse=m.reuse(),
            acceptance=m.acceptance(), p50_ms=m.latency(50), p95_ms=m.latency(95),
            forward_passes=self.backend.passes(), active=self.scheduler.active(),
            from_cache=m.from_cache, prefetched=m.prefetched,
            device_reason=b.device_reason, curve=b.curve, uptake=m.uptake(),
            uptake_hour=m.uptake_within(), uptake_languages=dict(m.by_language))


def rss_mb() -> float:
    """This process's resident memory now (Linux), else its peak."""
    try:
        pages = int(open("/proc/self/statm").read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
