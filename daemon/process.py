"""The daemon process itself: `specd start --foreground`, which `specd start` runs in the background.

In order: take the pid file's lock (one daemon per state folder), make the folders, load the
models, listen, tell the starter it is ready, serve until Shutdown or SIGTERM/SIGINT, then cancel
what is in flight and remove the socket and the pid file. The starter follows along through a
pipe (`--ready-fd`) of typed notes: progress lines, then "ready" or "error" with the reason.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from specd.daemon.backend import Backend
from specd.daemon.config import Config
from specd.daemon.paths import Paths, SetupError, private_dir, private_file, read_token, rotate, socket_dir
from specd.decoding.errors import UserError

log = logging.getLogger("specd")
LOCK_TRIES = 20  # a `specd status` may hold the pid file's lock for an instant while it reads it


class StartupNote(msgspec.Struct, frozen=True):
    """One line on the pipe from a starting daemon to its starter. "already": another daemon
    (`pid`) holds the pid file, e.g. one that a second starter started at the same moment."""
    kind: Literal["progress", "ready", "already", "error"]
    text: str
    pid: int = 0


class Notes:
    """The daemon's side of the pipe (or the log alone when no starter listens)."""

    def __init__(self, fd: int | None):
        self.fd = fd

    def send(self, kind: str, text: str, pid: int | None = None) -> None:
        (log.error if kind == "error" else log.info)("%s", text)
        if self.fd is None:
            return
        try:
            os.write(self.fd, msgspec.json.encode(StartupNote(kind, text, pid or os.getpid())) + b"\n")
        except OSError:          # the starter gave up waiting; the daemon carries on
            pass
        if kind != "progress":
            os.close(self.fd)
            self.fd = None


class PidLock:
    """The pid file, locked for the daemon's whole life. The lock is the truth (the OS drops it
    when the process dies, however it dies); the pid inside says who holds it."""

    def __init__(self, path: Path):
        self.path, self.fd = path, -1

    def acquire(self) -> bool:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        for _ in range(LOCK_TRIES):
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.ftruncate(self.fd, 0)
                os.write(self.fd, f"{os.getpid()}\n".encode())
                return True
            except BlockingIOError:
                time.sleep(0.05)
        os.close(self.fd)
        return False

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)


def lock_holder(path: Path) -> int | None:
    """The pid of the live process holding the pid file's lock, or None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        text = os.read(fd, 32).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)


def socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def run_daemon(config: Config, ready_fd: int | None) -> int:
    """The daemon's life; the exit status."""
    paths = Paths.of(config)
    notes = Notes(ready_fd)
    try:
        private_dir(paths.state)
        setup_logging(paths, config)
        lock = PidLock(paths.pid)
        if not lock.acquire():
            holder = lock_holder(paths.pid)
            notes.send("already", f"specd is already running (pid {holder})", holder)
            return 0
    except (SetupError, OSError) as error:
        notes.send("error", str(error))
        return 1
    try:
        return listen(config, paths, notes)
    finally:
        lock.release()


def listen(config: Config, paths: Paths, notes: Notes) -> int:
    from specd.daemon.socket_server import Server

    try:
        socket_dir(paths)
        if socket_answers(paths.socket):
            raise SetupError(f"another daemon answers at {paths.socket}; stop it first")
        paths.socket.unlink(missing_ok=True)   # a dead daemon's: we hold the lock
        token = read_token(paths.token, make=True) if config.daemon.tcp_port else None
        backend = build_backend(config, progress=lambda line: notes.send("progress", line))
    except (OSError, UserError) as error:
        notes.send("error", str(error))
        return 1
    except Exception as error:  # a bug while loading: say so to the starter too, with the trace in the log
        log.exception("loading failed")
        notes.send("error", f"loading failed: {type(error).__name__}: {error}")
        return 1
    server = Server(config, backend, paths, token)
    return asyncio.run(_serve(server, paths, notes))


def build_backend(config: Config, progress: Callable[[str], None]) -> Backend:
    """What computes the completions: an inference server (backend.kind = "server": no engine
    library is loaded), or the models loaded in this process."""
    if config.backend.kind == "server":
        from specd.daemon.remote import RemoteBackend

        progress(f"completions from {config.backend.url} ({config.backend.model}); no models loaded here")
        return RemoteBackend(config)
    from specd.daemon.local import LocalBackend
    from specd.daemon.runtime import build_engine  # torch: only the daemon itself loads it

    return LocalBackend(build_engine(config, progress=progress), config)


async def _serve(server, paths: Paths, notes: Notes) -> int:
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, server.stop)
    tcp = f", tcp 127.0.0.1:{server.config.daemon.tcp_port}" if server.config.daemon.tcp_port else ""
    try:
        cancelled = await server.serve(lambda: notes.send("ready", f"listening on {paths.socket}{tcp}"))
    except OSError as error:
        notes.send("error", f"cannot listen on {paths.socket}{tcp}: {error.strerror or error}")
        return 1
    log.info("stopped; %d requests cancelled on the way out", cancelled)
    return 0


def setup_logging(paths: Paths, config: Config) -> None:
    """Log to stderr, and to the log file unless stderr already is it (as `specd start` arranges)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if not _is_log_file(sys.stderr, paths.log):
        rotate(paths.log, config.daemon.log_max_mb << 20)
        os.close(private_file(paths.log))
        handlers.append(logging.FileHandler(paths.log))
    logging.basicConfig(level=logging.INFO, force=True, handlers=handlers,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _is_log_file(stream, path: Path) -> bool:
    try:
        a, b = os.fstat(stream.fileno()), os.stat(path)
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
