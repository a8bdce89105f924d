"""`specd start | status | stop` as a user runs them: real processes, tiny models chosen by config."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
from pathlib import Path

import pytest

from specd.daemon.client import Client, DaemonError, NotRunning
from specd.daemon.lifecycle import launch_daemon
from specd.daemon.paths import SetupError, private_dir
from specd.daemon.process import lock_holder
from tests.daemon.conftest import long_request, trace_of, until_running
from tests.homes import make_home


async def test_start_status_second_start_and_stop(fresh_home):
    home = fresh_home
    started = home.specd("start")
    assert started.returncode == 0, started.stderr
    assert "loading target" in started.stderr, "start shows progress while the models load"
    assert "pass costs measured in" in started.stderr or "pass costs read from" in started.stderr
    assert "specd started (pid" in started.stdout
    paths = home.paths()
    pid = lock_holder(paths.pid)
    assert pid is not None and paths.socket.exists()

    again = home.specd("start")
    assert again.returncode == 0 and f"already running (pid {pid}" in again.stdout, again.stdout + again.stderr
    assert lock_holder(paths.pid) == pid, "the second start left the first daemon in place"

    status = home.specd("status")
    assert status.returncode == 0 and f"pid {pid}" in status.stdout
    assert str(home.config().models.target) in status.stdout, "status names the models"
    assert "passes    ms by width: target 1:" in status.stdout and "; draft 1:" in status.stdout

    # stop cancels what is in flight: the request gets its "cancelled" reply before the daemon goes
    client = await Client.connect(home.config())
    message = long_request("file:///stop.py")
    task = asyncio.ensure_future(client.complete(message))
    await until_running(client, message.id)
    stopped = await asyncio.to_thread(home.specd, "stop")
    assert stopped.returncode == 0 and f"specd stopped (pid {pid}" in stopped.stdout, stopped.stderr
    reply = await task
    assert reply.outcome == "cancelled"
    await client.close()
    assert not paths.socket.exists() and not paths.pid.exists(), "stop removes the socket and the pid file"
    assert lock_holder(paths.pid) is None

    after = home.specd("status")
    assert after.returncode == 1 and "not running" in after.stdout
    assert "not running" in home.specd("stop").stdout


def daemon_processes(home) -> list[int]:
    """Pids of the processes running a daemon (`start --foreground`) for this home."""
    launch = str(home.paths().launch_config).encode()
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if launch in args and b"--foreground" in args:
            pids.append(int(cmdline.parent.name))
    return pids


async def test_two_starters_at_once_share_one_daemon_and_connect_can_start_it(fresh_home):
    home = fresh_home
    cli, client = await asyncio.gather(asyncio.to_thread(home.specd, "start"),
                                       Client.connect(home.config(), launch=launch_daemon, timeout=300))
    assert cli.returncode == 0, cli.stderr
    pid = lock_holder(home.paths().pid)
    assert client.welcome.pid == pid and f"(pid {pid}," in cli.stdout, "both found the same daemon"
    assert (await client.status()).pid == pid
    await client.close()
    for _ in range(200):      # a starter that lost the race has its daemon step aside at once
        if daemon_processes(home) == [pid]:
            break
        await asyncio.sleep(0.05)
    assert daemon_processes(home) == [pid], "exactly one daemon runs"


@pytest.mark.parametrize("problem", ["missing draft", "port in use"])
async def test_a_start_that_fails_says_why(fresh_home, tiny_draft, problem):
    home = fresh_home
    with socket.socket() as taken:
        if problem == "missing draft":
            reason = str(home.root / "no-such-model")
            home.config_path.write_text(home.config_path.read_text().replace(str(tiny_draft), reason))
        else:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            reason = str(taken.getsockname()[1])
            home.config_path.write_text(home.config_path.read_text().replace(
                "[daemon]\n", f"[daemon]\ntcp_port = {reason}\n"))
        result = home.specd("start", timeout=300)
        assert result.returncode != 0
        assert reason in result.stderr, f"the reason is said: {result.stderr}"
        with pytest.raises(NotRunning, match=re.escape(reason)):   # what an editor's server is told
            await Client.connect(home.config(), launch=launch_daemon, timeout=300)
    paths = home.paths()
    assert not paths.socket.exists() and lock_holder(paths.pid) is None, "a failed start leaves nothing running"


@pytest.mark.parametrize("section, line, key", [
    ("daemon", "start_timeout_s = 0", "daemon.start_timeout_s"),
    ("daemon", "bogus = 1", "bogus"),
    ("daemon", 'tcp_port = "x"', "daemon.tcp_port"),
    ("engine", "width = 0", "engine.width"),
])
def test_config_errors_name_the_key(fresh_home, section, line, key):
    home = fresh_home
    text = home.config_path.read_text()
    home.config_path.write_text(text.replace(f"[{section}]\n", f"[{section}]\n{line}\n"))
    result = home.specd("start")
    assert result.returncode == 2 and key in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (home.root / "state" / "specd").exists(), "nothing was started"


def test_foreground_start_finds_the_running_daemon(daemon):
    result = daemon.specd("start", "--foreground")
    assert result.returncode == 0 and "already running" in result.stdout, result.stdout + result.stderr


async def test_socket_is_0600_in_a_0700_folder(daemon, client):
    await client.complete(long_request("file:///permissions.py", max_tokens=1))
    await trace_of(daemon, "file:///permissions.py")   # so the trace exists (its line follows the reply)
    paths = daemon.paths()
    assert stat.S_ISSOCK(paths.socket.stat().st_mode)
    assert stat.S_IMODE(paths.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.socket.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(paths.state.stat().st_mode) == 0o700
    for private in (paths.pid, paths.log, paths.token, paths.trace):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private


def test_a_folder_someone_else_owns_is_refused(tmp_path):
    if os.getuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir()
        os.chown(foreign, 12345, 12345)
    else:
        foreign = Path("/")   # root's, not ours
    with pytest.raises(SetupError, match="not to you"):
        private_dir(foreign)


def test_a_loose_folder_is_made_owner_only(tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    private_dir(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


async def test_stop_ends_a_daemon_that_is_still_starting(fresh_home):
    """An editor's server may be starting the daemon when `specd stop` runs: stop ends it too."""
    home = fresh_home
    starter = asyncio.ensure_future(asyncio.to_thread(home.specd, "start"))
    for _ in range(2000):
        if home.paths().launching.exists():
            break
        await asyncio.sleep(0.005)
    assert home.paths().launching.exists(), "the starter notes the daemon it launches"
    stopped = home.specd("stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    started = await starter
    assert started.returncode != 0, "the start it interrupted says so"
    assert daemon_processes(home) == [], "nothing is left running"


async def test_the_default_drafter_loads_no_draft_model_and_says_so(tmp_path, tiny_target, monkeypatch):
    home = make_home(tmp_path, tiny_target, "auto")   # models.draft = "auto"; completion.drafter: lookup
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    try:
        started = home.specd("start")
        assert started.returncode == 0, started.stderr
        assert "loading draft" not in started.stderr
        client = await Client.connect(home.config())
        try:
            status = await client.status()
            with pytest.raises(DaemonError, match='bad_request: .*models.draft = "auto" loads the built-in one'):
                await client.complete(long_request("file:///d.py", drafter="hybrid", max_tokens=4))
        finally:
            await client.close()
        assert status.draft == "none (models.draft auto: completion.drafter lookup needs none)"
    finally:
        home.specd("stop")


async def test_stop_ends_a_daemon_of_another_protocol_version(fresh_home, monkeypatch):
    """After an upgrade the running daemon is the old specd's: `specd stop` cannot ask it in the
    new protocol, and signals it instead, as `specd status` tells the user to run it."""
    from specd.daemon import protocol
    from specd.daemon.lifecycle import stop_daemon

    home = fresh_home
    assert home.specd("start").returncode == 0
    pid = lock_holder(home.paths().pid)
    monkeypatch.setattr(protocol, "VERSION", protocol.VERSION + 1)   # this process is the newer specd
    with pytest.raises(DaemonError, match="protocol version"):
        await Client.connect(home.config())
    stopped = await stop_daemon(home.config())
    assert stopped.pid == pid and lock_holder(home.paths().pid) is None
    for _ in range(200):   # it has let go of its pid file; the process ends a moment later
        if not daemon_processes(home):
            break
        await asyncio.sleep(0.05)
    assert daemon_processes(home) == []
