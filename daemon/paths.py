"""Where the daemon keeps its things, and the owner-only rules for them.

The socket lives in a folder only its owner can enter: `$XDG_RUNTIME_DIR/specd/` (per login,
on a tmpfs), else `/tmp/specd-$UID/`. A folder that exists but belongs to someone else is refused,
not used: on a shared /tmp another user could have made it first. The log, pid file, trace and
TCP token live in the state folder, `$XDG_STATE_HOME/specd/` (~/.local/state/specd/).
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from specd.daemon.config import Config
from specd.decoding.errors import UserError

SOCKET_NAME = "specd.sock"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, with the terminating NUL


class SetupError(UserError):
    """The daemon's files or folders cannot be used safely; the message says which and why."""


@dataclass(frozen=True)
class Paths:
    socket: Path
    state: Path
    token: Path

    @classmethod
    def of(cls, config: Config) -> Paths:
        d = config.daemon
        socket = Path(d.socket).expanduser() if d.socket else default_runtime_dir() / SOCKET_NAME
        state = Path(d.state_dir).expanduser() if d.state_dir else default_state_dir()
        token = Path(d.token_file).expanduser() if d.token_file else state / "token"
        return cls(socket, state, token)

    @property
    def pid(self) -> Path:
        return self.state / "specd.pid"

    @property
    def log(self) -> Path:
        return self.state / "specd.log"

    @property
    def trace(self) -> Path:
        return self.state / "trace.jsonl"

    @property
    def launching(self) -> Path:
        """The pid of a daemon being started, until it holds the pid file (or gave up)."""
        return self.state / "specd.launching"

    @property
    def launch_config(self) -> Path:
        """The effective config a started daemon reads: exactly what its starter had."""
        return self.state / "launch.toml"


def default_runtime_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "specd"
    return Path(f"/tmp/specd-{os.getuid()}")


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base).expanduser() / "specd"


def private_dir(path: Path) -> Path:
    """Make `path` (and its parents) if needed; the folder itself must be ours and 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SetupError(f"{path} is not a plain folder; refusing to use it")
    if st.st_uid != os.getuid():
        raise SetupError(f"{path} belongs to uid {st.st_uid}, not to you; refusing to use it")
    if stat.S_IMODE(st.st_mode) != 0o700:
        path.chmod(0o700)
    return path


def socket_dir(paths: Paths) -> Path:
    if len(os.fsencode(paths.socket)) > MAX_SOCKET_PATH:
        raise SetupError(f"the socket path {paths.socket} is longer than {MAX_SOCKET_PATH} bytes; "
                         "set daemon.socket to a shorter one")
    return private_dir(paths.socket.parent)


def private_file(path: Path) -> int:
    """Open `path` for appending, made owner-only (0600); returns the file descriptor. A symbolic
    link there is refused (ELOOP), not followed: the file made owner-only is the one named."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, owner-only from the first byte."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")  # two writers at once
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    temporary.replace(path)


def read_token(path: Path, make: bool) -> str:
    """The TCP token: the file must be ours and owner-only. `make`: create it when absent."""
    if make and not path.exists():
        private_dir(path.parent)
        write_private(path, secrets.token_urlsafe(32) + "\n")
    try:
        st = path.stat()
        token = path.read_text().strip()
    except OSError as error:
        raise SetupError(f"cannot read the TCP token file {path}: {error.strerror}") from None
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise SetupError(f"the TCP token file {path} must be yours and owner-only (chmod 600 it)")
    if len(token) < 16:
        raise SetupError(f"the TCP token in {path} is shorter than 16 characters")
    return token


def rotate(path: Path, max_bytes: int) -> None:
    """Keep one predecessor: past `max_bytes`, `path` becomes `path.1` (replacing the old one)."""
    try:
        if path.stat().st_size > max_bytes:
            path.replace(path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
