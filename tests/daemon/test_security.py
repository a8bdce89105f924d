"""Who can reach the daemon and what it touches: its files are owner-only, folders and a config
that someone else controls are refused, TCP is loopback only and wants the token first, and no
request makes the daemon open a path it names."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import socket
import stat
import struct
import subprocess
from pathlib import Path

import psutil
import pytest

from specd.daemon import protocol
from specd.daemon.client import Client, DaemonError, new_request_id
from specd.daemon.paths import read_token
from tests.daemon.conftest import Raw, trace_of

NOBODY = 65534


def someone_elses_folder(tmp_path: Path) -> Path:
    """A folder of another user: made and given to nobody where we are root, else root's own."""
    if os.geteuid() != 0:
        return Path("/usr")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    return folder


async def test_every_file_the_daemon_keeps_is_owner_only(daemon, client):
    await client.complete(protocol.Complete(id=new_request_id(), document="file:///modes.py",
                                            prefix="def f(x):\n    ", max_tokens=2))
    await trace_of(daemon, "file:///modes.py")
    paths = daemon.paths()
    kept = [paths.socket, paths.socket.parent, paths.state, *paths.state.rglob("*")]
    assert {paths.pid, paths.log, paths.trace, paths.token, paths.launch_config} <= set(kept)
    for path in kept:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} is {oct(mode)}"
        assert path.lstat().st_uid == os.getuid(), path


@pytest.mark.parametrize("folder", ["runtime", "state"])
def test_a_start_is_refused_where_a_folder_belongs_to_someone_else(fresh_home, tmp_path, folder):
    home = fresh_home
    theirs = someone_elses_folder(tmp_path)
    key = "socket" if folder == "runtime" else "state_dir"
    value = str(theirs / "specd.sock") if folder == "runtime" else str(theirs)
    home.config_path.write_text(home.config_path.read_text().replace("[daemon]\n", f'[daemon]\n{key} = "{value}"\n'))
    refused = home.specd("start")
    assert refused.returncode != 0, refused.stdout
    assert f"{theirs} belongs to uid {theirs.stat().st_uid}, not to you" in refused.stderr, refused.stderr
    assert not (theirs / "specd.sock").exists()


def test_a_socket_folder_that_is_a_symbolic_link_is_refused(fresh_home, tmp_path):
    home = fresh_home
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    home.config_path.write_text(home.config_path.read_text().replace(
        "[daemon]\n", f'[daemon]\nsocket = "{tmp_path / "link" / "specd.sock"}"\n'))
    refused = home.specd("start")
    assert refused.returncode != 0 and "is not a plain folder" in refused.stderr, refused.stderr


@pytest.mark.parametrize("whose", ["writable by others", "someone else's"])
def test_a_config_file_that_others_control_is_refused(fresh_home, whose):
    home = fresh_home
    if whose == "writable by others":
        home.config_path.chmod(0o666)
    elif os.geteuid() == 0:
        os.chown(home.config_path, NOBODY, NOBODY)
    else:
        pytest.skip("giving a file to another user needs root")
    refused = home.specd("status")
    assert refused.returncode == 2 and str(home.config_path) in refused.stderr, refused.stderr
    assert ("writable by" in refused.stderr) if whose == "writable by others" else ("belongs to uid" in refused.stderr)


def test_tcp_listens_on_loopback_only(daemon):
    port = daemon.config().daemon.tcp_port
    listening = [c for c in psutil.Process(daemon.daemon_pid()).net_connections("inet") if c.status == "LISTEN"]
    assert listening and {c.laddr.ip for c in listening} == {"127.0.0.1"}, listening
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                with socket.socket() as outside, pytest.raises(OSError):
                    outside.settimeout(5)
                    outside.connect((address.address, port))


@pytest.mark.parametrize("token", ["", "wrong", "almost", "longer", "no hello"])
async def test_tcp_refuses_a_client_without_the_right_token(daemon, token):
    config = daemon.config()
    right = read_token(daemon.paths().token, make=False)
    sent = {"": "", "wrong": "x" * len(right), "almost": right[:-1] + chr(ord(right[-1]) ^ 1), "longer": right + "x"}
    reader, writer = await asyncio.open_connection("127.0.0.1", config.daemon.tcp_port)
    raw = Raw(reader, writer)
    if token == "no hello":
        await raw.send(protocol.Complete(id=7, document="file:///tcp.py", prefix="x"))
        reply = await raw.reply()
        assert isinstance(reply, protocol.Error) and reply.code == "handshake", reply
    else:
        with pytest.raises(DaemonError) as refused:
            await Client.handshake(reader, writer, sent[token], config.daemon.max_frame_bytes)
        assert refused.value.code == "unauthorized"
        assert await asyncio.wait_for(reader.read(), 10) == b"", "the connection is closed"
    writer.close()


async def test_before_the_handshake_a_large_frame_closes_the_connection(daemon):
    """A stranger on loopback cannot make the daemon hold a full-size frame for it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", daemon.config().daemon.tcp_port)
    raw = Raw(reader, writer)
    raw.send_body(b"{" + b" " * 20_000 + b"}")
    reply = await raw.reply()
    assert isinstance(reply, protocol.Error) and reply.code == "frame_too_large", reply
    assert await asyncio.wait_for(reader.read(), 10) == b""


async def test_a_connection_that_never_says_hello_is_closed(daemon):
    reader, writer = await asyncio.open_connection("127.0.0.1", daemon.config().daemon.tcp_port)
    timeout = daemon.config().daemon.handshake_timeout_s
    assert await asyncio.wait_for(reader.read(), timeout + 10) == b"", "closed after the handshake timeout"
    writer.close()


# --- no request opens a path it names ---

IN_ACCESS, IN_MODIFY, IN_ATTRIB, IN_OPEN, IN_CREATE, IN_DELETE = 0x1, 0x2, 0x4, 0x20, 0x100, 0x200


class Watch:
    """inotify on a folder: every open, read, write, creation or removal there, by any process."""

    def __init__(self, folder: Path):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        mask = IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_CREATE | IN_DELETE
        assert self.libc.inotify_add_watch(self.fd, str(folder).encode(), mask) >= 0

    def events(self) -> list[tuple[int, str]]:
        found = []
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return found
        while data:
            _, mask, _, length = struct.unpack("iIII", data[:16])
            found.append((mask, data[16:16 + length].rstrip(b"\0").decode()))
            data = data[16 + length:]
        return found

    def close(self) -> None:
        os.close(self.fd)


async def test_no_request_makes_the_daemon_open_a_path_it_names(daemon, client, tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    canary = secrets / "canary.txt"
    canary.write_text("the canary's words\n")
    absent = secrets / "absent.txt"
    watch = Watch(secrets)
    try:
        named = [str(canary), canary.as_uri(), str(absent), f"{secrets}/../secrets/canary.txt", str(secrets)]
        for path in named:
            await client.complete(protocol.Complete(
                id=new_request_id(), document=path, prefix=f"# {path}\nopen({path!r})\n", max_tokens=2,
                extras=[protocol.Extra(path=path, text="x = 1\n")], hints=[path]))
        raw = await Raw.unix(daemon, hello=False)
        await raw.send(protocol.Hello(protocol.VERSION, client=str(canary), token=str(canary)))
        assert isinstance(await raw.reply(), protocol.Welcome)
        await raw.send(protocol.GetStatus(new_request_id()))
        await raw.reply()
        await raw.close()
        assert watch.events() == [], "the daemon touched a path a request named"
        assert not absent.exists()
        subprocess.run(["cat", str(canary)], capture_output=True, check=True)   # the watch does see opens
        assert any(name == canary.name for _, name in watch.events())
    finally:
        watch.close()

