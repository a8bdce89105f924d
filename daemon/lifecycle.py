"""`specd start | stop | status`, and `start_daemon`, which `specd start` and `Client.connect(start=True)` share.

`start` runs `specd start --foreground` as a new session in the background, its output going to
the log, and follows its startup notes through a pipe: it prints the progress lines, and returns
once the daemon's socket answers, or says why it did not start and exits non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

import msgspec

from specd.daemon.config import Config, load_config, render
from specd.daemon.paths import Paths, private_dir, private_file, rotate, write_private
from specd.daemon.process import StartupNote, lock_holder

STOP_WAIT_S = 60.0   # a clean stop waits for the request in flight to reach its next step
LAUNCH_WAIT_S = 15.0  # from a starter's fork to its daemon holding the pid file, at the most


class StartError(Exception):
    """The daemon did not start; the message says why."""


def add_lifecycle_parsers(sub) -> None:
    start = sub.add_parser("start", help="start the daemon (in the background) and wait until it answers")
    start.add_argument("--foreground", action="store_true", help="run the daemon in this process")
    start.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # where `specd start` reads the notes
    start.set_defaults(run=cmd_start)
    sub.add_parser("stop", help="stop the daemon: cancel what is in flight, remove its socket").set_defaults(run=cmd_stop)
    sub.add_parser("status", help="pid, uptime, models, memory, requests, reuse, acceptance, latency"
                   ).set_defaults(run=cmd_status)


def cmd_start(args) -> int:
    config = load_config(args.config)
    if args.foreground:
        from specd.daemon.process import run_daemon

        if (pid := answering_pid(config)) is not None:
            print(f"specd is already running (pid {pid}, socket {Paths.of(config).socket})")
            return 0
        return run_daemon(config, args.ready_fd)
    started = time.monotonic()
    pid, already = start_daemon(config, lambda line: print(f"specd: {line}", file=sys.stderr, flush=True))
    where = Paths.of(config).socket
    if already:
        print(f"specd is already running (pid {pid}, socket {where})")
    else:
        print(f"specd started (pid {pid}, socket {where}) in {time.monotonic() - started:.1f} s")
    return 0


def start_daemon(config: Config, say: Callable[[str], None], timeout: float | None = None) -> tuple[int, bool]:
    """(pid, already running): a daemon answering at the config's socket, started if need be."""
    paths = Paths.of(config)
    private_dir(paths.state)
    if (pid := answering_pid(config)) is not None:
        return pid, True
    timeout = timeout or config.daemon.start_timeout_s
    if (pid := lock_holder(paths.pid)) is not None:
        say(f"a daemon is starting (pid {pid}); waiting for it")
        return wait_until_answering(config, pid, timeout), True
    write_private(paths.launch_config, render(config))
    rotate(paths.log, config.daemon.log_max_mb << 20)
    # From before the fork until the child holds the pid file, only this note says a daemon is on
    # its way: `specd stop` reads it (a starter killed mid-start leaves it, and its child).
    write_private(paths.launching, str(os.getpid()))
    read_end, write_end = os.pipe()
    log_fd = private_file(paths.log)
    try:
        child = subprocess.Popen(
            # -P: the cwd is not put on sys.path, so a folder there named `daemon` is not imported
            [sys.executable, "-P", "-m", "specd.daemon", "--config", str(paths.launch_config), "start", "--foreground",
             "--ready-fd", str(write_end)],
            pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, start_new_session=True)
    finally:
        os.close(write_end)
        os.close(log_fd)
    threading.Thread(target=child.wait, daemon=True).start()   # reap it whenever it ends
    with os.fdopen(read_end, "rb") as pipe:
        try:
            last = follow_notes(pipe, say, time.monotonic() + timeout)
        except StartError:
            _reap(child)  # a start that failed leaves nothing running once it has said so
            raise
        finally:
            paths.launching.unlink(missing_ok=True)
    if last is None:
        child.terminate()
        _reap(child)
        raise StartError(f"the daemon did not get ready within {timeout:.0f} s; see {paths.log}")
    return wait_until_answering(config, last.pid, timeout), last.kind == "already"


def _reap(child: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Wait for a daemon that is on its way out; kill it if it takes longer than `grace_s`."""
    try:
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def follow_notes(pipe, say: Callable[[str], None], deadline: float) -> StartupNote | None:
    """Print progress notes until "ready" or "already" (returned) or "error" (raised); None at
    the deadline."""
    decoder = msgspec.json.Decoder(StartupNote)
    buffered = b""
    while time.monotonic() < deadline:
        readable, _, _ = select.select([pipe], [], [], min(1.0, max(0.0, deadline - time.monotonic())))
        if not readable:
            continue
        chunk = os.read(pipe.fileno(), 4096)
        if not chunk:
            raise StartError("the daemon exited before it was ready" + (f": {buffered.decode()}" if buffered else ""))
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            note = decoder.decode(line)
            if note.kind == "error":
                raise StartError(note.text)
            if note.kind in ("ready", "already"):
                return note
            say(note.text)
    return None


def answering_pid(config: Config) -> int | None:
    """The pid of the daemon that answers a handshake where the config says, or None."""
    from specd.daemon.client import Client

    async def probe() -> int:
        client = await Client.connect(config, timeout=10.0)
        await client.close()
        return client.welcome.pid

    try:
        return asyncio.run(probe())
    except (ConnectionError, TimeoutError):
        return None


def wait_until_answering(config: Config, pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (answered := answering_pid(config)) is not None:
            return answered
        if lock_holder(Paths.of(config).pid) is None:
            raise StartError(f"the daemon (pid {pid}) exited before it answered; see {Paths.of(config).log}")
        time.sleep(0.1)
    raise StartError(f"the daemon (pid {pid}) did not answer within {timeout:.0f} s")


def cmd_stop(args) -> int:
    config = load_config(args.config)
    paths = Paths.of(config)
    pid, cancelled = asyncio.run(_ask_to_stop(config))
    if pid is None and (pid := lock_holder(paths.pid) or _being_launched(paths, config)) is not None:
        os.kill(pid, signal.SIGTERM)      # starting, or not answering: stop it anyway
    deadline = time.monotonic() + STOP_WAIT_S
    while pid is not None and lock_holder(paths.pid) is not None:
        if time.monotonic() > deadline:
            raise StartError(f"the daemon (pid {pid}) has not stopped after {STOP_WAIT_S:.0f} s")
        time.sleep(0.05)
    paths.socket.unlink(missing_ok=True)   # left by a daemon that was killed, if any
    if pid is None:
        print("specd is not running")
        return 0
    print(f"specd stopped (pid {pid}" + (f"; {cancelled} requests cancelled)" if cancelled else ")"))
    return 0


def _being_launched(paths: Paths, config: Config) -> int | None:
    """The pid of a daemon that a starter is launching right now, once it has taken the pid file
    (a second or so after the fork); None when no start is under way or it came to nothing."""
    deadline = time.monotonic() + LAUNCH_WAIT_S
    while paths.launching.exists() and time.monotonic() < deadline:
        if (pid := lock_holder(paths.pid)) is not None:
            return pid
        time.sleep(0.05)
    if paths.launching.exists():  # its starter died before it forked: nothing is coming
        paths.launching.unlink(missing_ok=True)
    return lock_holder(paths.pid)


async def _ask_to_stop(config: Config) -> tuple[int | None, int]:
    from specd.daemon.client import Client

    try:
        client = await Client.connect(config, timeout=10.0)
    except (ConnectionError, TimeoutError):
        return None, 0
    reply = await client.shutdown()
    await client.close()
    return client.welcome.pid, reply.cancelled


def cmd_status(args) -> int:
    from specd.daemon.client import Client

    config = load_config(args.config)

    async def ask():
        client = await Client.connect(config, timeout=10.0)
        try:
            return await client.status()
        finally:
            await client.close()

    try:
        status = asyncio.run(ask())
    except (ConnectionError, TimeoutError):
        pid = lock_holder(Paths.of(config).pid)
        print("specd is not running" if pid is None else f"specd is starting (pid {pid})")
        return 1
    print(render_status(status))
    return 0


def render_status(s) -> str:
    share = lambda x: "-" if x is None else f"{x:.0%}"  # noqa: E731
    ms = lambda x: "-" if x is None else f"{x:.0f} ms"  # noqa: E731
    running = sum(a.state == "running" for a in s.active)
    tcp = f", tcp 127.0.0.1:{s.tcp_port}" if s.tcp_port else ""
    acceptance = ", ".join(f"{name} {rate:.2f}" for name, rate in sorted(s.acceptance.items())) or "-"
    return "\n".join([
        f"specd {s.version}: running, pid {s.pid}, up {_duration(s.uptime_s)}",
        f"socket    {s.socket}{tcp}",
        f"models    target {s.target}, draft {s.draft}; {s.device}, {s.dtype}",
        f"memory    {s.rss_mb:.0f} MB resident; KV caches {s.cache_mb:.1f} MB for {s.cache_documents} documents",
        f"requests  {s.served} served, {s.cancelled} cancelled, {s.errors} errors; "
        f"{running} running, {len(s.active) - running} queued; {s.forward_passes} forward passes",
        f"reuse     {share(s.reuse)} of prompt tokens came from the cache",
        f"accepted  {acceptance}",
        f"latency   p50 {ms(s.p50_ms)}, p95 {ms(s.p95_ms)} (time to result)",
    ])


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s"
