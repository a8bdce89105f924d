"""Real daemon processes (`specd start`) on the tiny models, chosen by a config file, with every
folder they touch (runtime, state, cache, config) under a temporary one."""

from __future__ import annotations

import asyncio
import socket

import pytest

from specd.bench.daemon import until_running  # noqa: F401 (for the tests here)
from specd.daemon import protocol
from specd.daemon.client import Client, new_request_id
from specd.daemon.tracing import TraceRecord
from tests.homes import LONG_TEXT, Home, make_home  # noqa: F401 (LONG_TEXT: for the tests here)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="package")
def home(tmp_path_factory, tiny_target, tiny_draft):
    """The shared daemon's world; this process's environment points at it, so that the in-process
    clients find the daemon exactly as `specd` does."""
    h = make_home(tmp_path_factory.mktemp("d"), tiny_target, tiny_draft, tcp_port=free_port(),
                  handshake_timeout_s=5)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in h.env.items():
            mp.setenv(key, value)
        yield h


@pytest.fixture(scope="package")
def daemon(home):
    started = home.specd("start")
    assert started.returncode == 0, f"specd start failed: {started.stdout}{started.stderr}"
    yield home
    stopped = home.specd("stop")
    assert stopped.returncode == 0, stopped.stderr


@pytest.fixture
async def client(daemon):
    c = await Client.connect(daemon.config())
    yield c
    await c.close()


@pytest.fixture
def fresh_home(tmp_path_factory, tiny_target, tiny_draft, monkeypatch):
    """A world of its own, for a test that starts and stops its daemon."""
    h = make_home(tmp_path_factory.mktemp("f"), tiny_target, tiny_draft)
    for key, value in h.env.items():
        monkeypatch.setenv(key, value)
    yield h
    h.specd("stop")


def long_request(document: str, **fields) -> protocol.Complete:
    fields = {"prefix": LONG_TEXT, "suffix": "", "max_tokens": 256, "drafter": "none", **fields}
    return protocol.Complete(id=new_request_id(), document=document, **fields)


async def trace_of(home: Home, document: str, count: int = 1) -> list[TraceRecord]:
    """The trace lines of `document`, once there are `count` (the line follows the reply)."""
    for _ in range(2000):
        lines = home.trace(document)
        if len(lines) >= count:
            return lines
        await asyncio.sleep(0.005)
    raise AssertionError(f"{document}: {len(home.trace(document))} trace lines, expected {count}")


class Raw:
    """A client that writes the wire format by hand, to send what `Client` never would."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def unix(cls, home: Home, hello: bool = True) -> Raw:
        raw = cls(*await asyncio.open_unix_connection(home.paths().socket))
        if hello:
            await raw.send(protocol.Hello(protocol.VERSION))
            assert isinstance(await raw.reply(), protocol.Welcome)
        return raw

    def send_body(self, body: bytes, length: int | None = None) -> None:
        self.writer.write((len(body) if length is None else length).to_bytes(4, "big") + body)

    async def send(self, message: protocol.Message) -> None:
        self.writer.write(protocol.pack(message))
        await self.writer.drain()

    async def reply(self, timeout: float = 60.0):
        body = await asyncio.wait_for(protocol.read_frame(self.reader, 1 << 24), timeout)
        return protocol.decode_reply(body)

    async def close(self) -> None:
        self.writer.close()
