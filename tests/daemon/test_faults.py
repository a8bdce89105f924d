"""Faults a long-lived daemon meets, each made for real: a crash that leaves its socket and pid
file behind, a client killed mid-request, a trace it cannot write (unwritable, a full disk), and
a forward pass that runs out of memory."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
from pathlib import Path

import pytest

from specd.daemon import protocol
from specd.daemon.client import Client, DaemonError, new_request_id
from specd.daemon.process import lock_holder
from tests.daemon.conftest import LONG_TEXT, trace_of
from tests.homes import SPECD, make_home


def keep_a_curve(config) -> None:
    """Write the cost curve the daemon of `config` would read, as a start before it would have."""
    from specd.daemon.runtime import load_models
    from specd.models.curves import CurveFile, curve_key, curve_path, write_curve
    from tests.conftest import CHEAP, hand_curve

    target, draft = load_models(config, progress=lambda line: None)
    key = curve_key(target, draft, config.engine.for_device("cpu"))
    write_curve(curve_path(config.cache_dir(), target, key), CurveFile(key, hand_curve(CHEAP)))


def test_a_crashed_daemons_socket_and_pid_file_are_cleaned_up_by_the_next_start(fresh_home):
    home = fresh_home
    assert home.specd("start").returncode == 0
    crashed = home.daemon_pid()
    home.kill_daemon()
    paths = home.paths()
    assert paths.socket.exists() and paths.pid.exists(), "SIGKILL leaves both behind"
    assert "not running" in home.specd("status").stdout, "a stale pid file is not a running daemon"

    started = home.specd("start")
    assert started.returncode == 0 and "specd started" in started.stdout, started.stdout + started.stderr
    assert lock_holder(paths.pid) == home.daemon_pid() != crashed
    assert home.specd("status").returncode == 0, "the new daemon answers at the same socket"


async def test_a_client_killed_mid_request_frees_the_worker_at_the_next_pass(daemon, client, tmp_path):
    source = tmp_path / "killed.py"
    source.write_text(LONG_TEXT)
    leaving = subprocess.Popen([SPECD, "complete", "--file", str(source), "--max-tokens", "200", "--drafter", "none"],
                               env={**os.environ, **daemon.env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = source.resolve().as_uri()
    try:
        for _ in range(6000):
            if any(a.document == uri and a.state == "running" and a.passes >= 3
                   for a in (await client.status()).active):
                break
            await asyncio.sleep(0.005)
        else:
            pytest.fail("the killed client's request never ran")
    finally:
        leaving.kill()
        leaving.wait()
    (line,) = await trace_of(daemon, uri)
    assert (line.outcome, line.cause) == ("cancelled", "disconnect")
    assert line.passes_after_cancel is not None and line.passes_after_cancel <= 1, line
    served = await client.complete(protocol.Complete(id=new_request_id(), document="file:///after-kill.py",
                                                     prefix="def f(x):\n    ", max_tokens=4))
    assert served.outcome == "done"


def fill(folder: Path) -> None:
    """Write a filler file into `folder` until its file system is full."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("fault", ["unwritable", "disk full"])
async def test_a_trace_that_cannot_be_written_costs_one_warning_not_a_request(fresh_home, tmp_path, fault):
    home = fresh_home
    if fault == "disk full" and os.geteuid() != 0:
        pytest.skip("a full disk is a mounted full tmpfs here, which needs root")
    assert home.specd("start").returncode == 0
    trace = home.paths().trace
    client = await Client.connect(home.config())
    ask = lambda n: client.complete(protocol.Complete(  # noqa: E731
        id=new_request_id(), document=f"file:///trace-{n}.py", prefix=f"def f{n}(x):\n    ", max_tokens=4))
    await ask(0)
    await trace_of(home, "file:///trace-0.py")
    mounted: list[Path] = []
    try:
        if fault == "unwritable":
            trace.unlink()
            trace.mkdir()         # open() fails with EISDIR, for root as for anyone
        else:         # the trace file is one on a tiny tmpfs, and that is full: ENOSPC
            disk = tmp_path / "full"
            disk.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(disk)], check=True)
            mounted.append(disk)
            (disk / "trace.jsonl").touch()
            fill(disk)
            subprocess.run(["mount", "--bind", str(disk / "trace.jsonl"), str(trace)], check=True)
            mounted.insert(0, trace)
        for n in range(1, 5):
            assert (await ask(n)).outcome == "done", "requests are served while the trace fails"
    finally:
        for point in mounted:
            subprocess.run(["umount", str(point)], check=True)
        if trace.is_dir():
            trace.rmdir()
    await ask(5)
    await trace_of(home, "file:///trace-5.py")
    await client.close()
    for _ in range(500):   # the daemon logs the recovery just after the line it wrote
        if "is written again" in (log := home.paths().log.read_text()):
            break
        await asyncio.sleep(0.01)
    assert log.count("cannot write the trace") == 1, log
    assert "No space left" in log if fault == "disk full" else "Is a directory" in log
    assert "is written again" in log
    assert not home.trace("file:///trace-3.py"), "what failed was not written later"


async def test_out_of_memory_in_a_forward_pass_fails_that_request_and_the_next_is_served(
        tmp_path, tiny_target, tiny_draft, monkeypatch):
    """The draft's cache is sized for 8 billion tokens (1.25 TB): its first forward pass allocates
    it and fails for real, in torch's allocator. The address space is capped too, so the
    allocation fails even where the kernel overcommits. The cost curve is kept already, as on any
    start after a machine's first (measuring it would allocate such a cache at start-up)."""
    home = make_home(tmp_path, tiny_target, tiny_draft)
    home.config_path.write_text(home.config_path.read_text().replace(
        "[engine]\n", "[engine]\ndraft_context_tokens = 8000000000\n"))
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    keep_a_curve(home.config())
    try:
        started = home.specd("start")
        assert started.returncode == 0, started.stderr
        pid = home.daemon_pid()
        resource.prlimit(pid, resource.RLIMIT_AS, (vm_bytes(pid) + (8 << 30), resource.RLIM_INFINITY))
        client = await Client.connect(home.config())
        # each its own limit, so that none is answered from the suggestion cache
        ask = lambda drafter, limit: client.complete(protocol.Complete(  # noqa: E731
            id=new_request_id(), document="file:///oom.py", prefix="def f(x):\n    ", max_tokens=limit,
            drafter=drafter))
        before = await ask("lookup", 8)
        with pytest.raises(DaemonError) as failed:
            await ask("draft", 9)
        assert failed.value.code == "internal" and "can't allocate memory" in failed.value.message, failed.value
        after = await ask("lookup", 10)
        assert after.outcome == "done" and not after.stats.from_cache
        assert after.text.startswith(before.text), "the next request is served, and agrees"
        with pytest.raises(DaemonError, match="can't allocate memory"):
            await ask("draft", 11)  # the same failure again, not a cache left broken by the first
        assert (await client.status()).pid == pid
        await client.close()
    finally:
        home.specd("stop")


def vm_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")

