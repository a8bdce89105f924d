"""An isolated world for a real daemon: its config file (tiny models) and its XDG folders, all
under one temporary folder, so tests never touch the user's daemon, cache or traces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from specd.daemon.config import Config, load_config
from specd.daemon.paths import Paths
from specd.daemon.tracing import TraceRecord, read_trace

SPECD = str(Path(sys.executable).parent / "specd")
# Long enough that prefill alone takes a few hundred passes of 8 tokens: time to see it running.
LONG_TEXT = "".join(f"def f{i}(x):\n    return x * {i} + {i * 7}\n\n" for i in range(90))


def config_text(target: Path, draft: Path, **daemon) -> str:
    daemon.setdefault("max_frame_bytes", 65536)
    options = "".join(f"{key} = {msgspec.json.encode(value).decode()}\n" for key, value in daemon.items())
    return f"""[models]
target = "{target}"
draft = "{draft}"
device = "cpu"

[engine]
prefix_tokens = 2048
suffix_tokens = 64
max_tokens_limit = 256
prefill_chunk = 8
cache_memory_mb = 64
glance_tokens = 0        # whole prompts: the tests of glances turn them on (tests/daemon/test_glance.py)
min_probability = 0      # no doubt stop: tiny random models doubt every token, and a long request must stay long
min_first_probability = 0

[completion]
first_line_ms = 0        # completions that do not depend on how fast the machine is today

[daemon]
{options}"""


@dataclass
class Home:
    """One daemon's world: its config file and the XDG folders it uses."""
    root: Path
    env: dict[str, str]

    @property
    def config_path(self) -> Path:
        return Path(self.env["SPECD_CONFIG"])

    def config(self) -> Config:
        return load_config(self.config_path)

    def paths(self) -> Paths:
        return Paths.of(self.config())

    def specd(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([SPECD, *args], env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout)

    def trace(self, document: str) -> list[TraceRecord]:
        return [r for r in read_trace(self.paths().trace) if r.document == document]

    def daemon_pid(self) -> int:
        return int(self.paths().pid.read_text().split()[0])

    def kill_daemon(self) -> None:
        """SIGKILL, as a crash would: no clean-up at all. Returns once the process is gone."""
        pid = self.daemon_pid()
        os.kill(pid, signal.SIGKILL)
        for _ in range(500):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)


def config_file(folder: Path, text: str) -> Path:
    """`text` as folder/config.toml, owner-only, as a user's config file is."""
    path = folder / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def make_home(root: Path, target: Path, draft: Path, **daemon) -> Home:
    for name in ("run", "state", "cache"):
        (root / name).mkdir(parents=True, exist_ok=True)
    config = root / "config.toml"
    config.write_text(config_text(target, draft, **daemon))
    return Home(root, {"SPECD_CONFIG": str(config), "XDG_RUNTIME_DIR": str(root / "run"),
                       "XDG_STATE_HOME": str(root / "state"), "XDG_CACHE_HOME": str(root / "cache"),
                       "HF_HUB_OFFLINE": "1"})
