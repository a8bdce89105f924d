"""Starting, finding and stopping the daemon: what `specd start | stop | status` and the language
server (through `Client.connect(launch=launch_daemon)`) do, as coroutines run in the caller's loop.

`launch_daemon` runs `specd start --foreground` as a new session in the background, its output
going to the log, and follows its startup notes through a pipe: it passes the progress lines on,
and returns once the daemon's socket answers, or raises StartError saying why it did not start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from specd.daemon import protocol
from specd.daemon.client import Client, DaemonError
from specd.daemon.config import Config, render
from specd.daemon.paths import Paths, private_dir, private_file, rotate, write_private
from specd.daemon.process import StartupNote, lock_holder
from specd.decoding.errors import UserError

log = logging.getLogger("specd")
STOP_WAIT_S = 60.0   # a clean stop waits for the request in flight to reach its next step
LAUNCH_WAIT_S = 15.0  # from a starter's fork to its daemon holding the pid file, at the most
PROBE_TIMEOUT_S = 10.0


class StartError(UserError):
    """The daemon did not start; the message says why."""


class Running(NamedTuple):
    pid: int
    already: bool    # it was running (or being started by someone else) before this call


class Stopped(NamedTuple):
    pid: int | None  # None: no daemon was running
    cancelled: int   # requests it cancelled on the way out


async def launch_daemon(config: Config, timeout: float | None = None,
                        say: Callable[[str], None] = log.info) -> Running:
    """A daemon answering at the config's socket, started if need be; `say` gets its progress."""
    paths = Paths.of(config)
    private_dir(paths.state)
    if (pid := await answering_pid(config)) is not None:
        return Running(pid, True)
    timeout = timeout or config.daemon.start_timeout_s
    if (pid := lock_holder(paths.pid)) is not None:
        say(f"a daemon is starting (pid {pid}); waiting for it")
        return Running(await wait_until_answering(config, pid, timeout), True)
    write_private(paths.launch_config, render(config))
    rotate(paths.log, config.daemon.log_max_mb << 20)
    # From before the fork until the child holds the pid file, only this note says a daemon is on
    # its way: `specd stop` reads it (a starter killed mid-start leaves it, and its child).
    write_private(paths.launching, str(os.getpid()))
    read_end, write_end = os.pipe()
    log_fd = private_file(paths.log)
    try:
        child = subprocess.Popen(
            # -P: the cwd is not put on sys.path, so a folder there named like a module is not imported
            [sys.executable, "-P", "-m", "specd.cli", "--config", str(paths.launch_config), "start", "--foreground",
             "--ready-fd", str(write_end)],
            pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, start_new_session=True)
    finally:
        os.close(write_end)
        os.close(log_fd)
    # Reap it whenever it ends. Not an asyncio subprocess: that one is killed when its loop closes.
    threading.Thread(target=child.wait, daemon=True).start()
    try:
        last = await follow_notes(read_end, say, time.monotonic() + timeout)
    except StartError:
        await _reap(child)  # a start that failed leaves nothing running once it has said so
        raise
    finally:
        paths.launching.unlink(missing_ok=True)
    if last is None:
        child.terminate()
        await _reap(child)
        raise StartError(f"the daemon did not get ready within {timeout:.0f} s; see {paths.log}")
    return Running(await wait_until_answering(config, last.pid, timeout), last.kind == "already")


async def _reap(child: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Wait for a daemon that is on its way out; kill it if it takes longer than `grace_s`."""
    deadline = time.monotonic() + grace_s
    while child.poll() is None:
        if time.monotonic() > deadline:
            child.kill()
            deadline = float("inf")
        await asyncio.sleep(0.05)


async def follow_notes(fd: int, say: Callable[[str], None], deadline: float) -> StartupNote | None:
    """Pass progress notes on until "ready" or "already" (returned) or "error" (raised); None at
    the deadline. Closes `fd`."""
    decoder = msgspec.json.Decoder(StartupNote)
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb"))
    try:
        while True:
            try:
                line = await asyncio.wait_for(reader.readline(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return None
            if not line.endswith(b"\n"):
                raise StartError("the daemon exited before it was ready" + (f": {line.decode()}" if line else ""))
            note = decoder.decode(line)
            if note.kind == "error":
                raise StartError(note.text)
            if note.kind in ("ready", "already"):
                return note
            say(note.text)
    finally:
        transport.close()


async def answering_pid(config: Config) -> int | None:
    """The pid of the daemon that answers a handshake where the config says, or None."""
    try:
        client = await Client.connect(config, timeout=PROBE_TIMEOUT_S)
    except (ConnectionError, TimeoutError):
        return None
    await client.close()
    return client.welcome.pid


async def wait_until_answering(config: Config, pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (answered := await answering_pid(config)) is not None:
            return answered
        if lock_holder(Paths.of(config).pid) is None:
            raise StartError(f"the daemon (pid {pid}) exited before it answered; see {Paths.of(config).log}")
        await asyncio.sleep(0.1)
    raise StartError(f"the daemon (pid {pid}) did not answer within {timeout:.0f} s")


async def stop_daemon(config: Config) -> Stopped:
    """Stop the daemon: ask it to (it cancels what is in flight), else signal it, and wait until it
    has gone; one still being launched is stopped too."""
    paths = Paths.of(config)
    pid, cancelled = await _ask_to_stop(config)
    if pid is None and (pid := lock_holder(paths.pid) or await _being_launched(paths)) is not None:
        os.kill(pid, signal.SIGTERM)      # starting, or not answering: stop it anyway
    deadline = time.monotonic() + STOP_WAIT_S
    while pid is not None and lock_holder(paths.pid) is not None:
        if time.monotonic() > deadline:
            raise StartError(f"the daemon (pid {pid}) has not stopped after {STOP_WAIT_S:.0f} s")
        await asyncio.sleep(0.05)
    paths.socket.unlink(missing_ok=True)   # left by a daemon that was killed, if any
    return Stopped(pid, cancelled)


async def _being_launched(paths: Paths) -> int | None:
    """The pid of a daemon that a starter is launching right now, once it has taken the pid file
    (soon after the fork); None when no start is under way or it came to nothing."""
    deadline = time.monotonic() + LAUNCH_WAIT_S
    while paths.launching.exists() and time.monotonic() < deadline:
        if (pid := lock_holder(paths.pid)) is not None:
            return pid
        await asyncio.sleep(0.05)
    if paths.launching.exists():  # its starter died before it forked: nothing is coming
        paths.launching.unlink(missing_ok=True)
    return lock_holder(paths.pid)


async def _ask_to_stop(config: Config) -> tuple[int | None, int]:
    try:
        client = await Client.connect(config, timeout=PROBE_TIMEOUT_S)
    except (ConnectionError, TimeoutError):
        return None, 0
    except DaemonError as error:
        if error.code != "version":
            raise
        return None, 0   # a daemon of another specd (an upgrade): signalled, as one not answering
    reply = await client.shutdown()
    await client.close()
    return client.welcome.pid, reply.cancelled


async def daemon_status(config: Config) -> protocol.Status | None:
    """What the daemon says of itself, or None when none answers."""
    try:
        client = await Client.connect(config, timeout=PROBE_TIMEOUT_S)
    except (ConnectionError, TimeoutError):
        return None
    try:
        return await client.status()
    finally:
        await client.close()
