"""The wire protocol against a real daemon: whatever a client sends, it gets an answer and the
daemon lives on. Plus the framing itself, the handshake, and loopback TCP with its token."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from specd.daemon import protocol
from specd.daemon.client import Client, DaemonError, new_request_id
from specd.daemon.config import load_config
from specd.daemon.paths import read_token
from tests.daemon.conftest import Raw, long_request


async def still_serving(raw: Raw) -> None:
    """The same connection still answers a well-formed request."""
    request_id = new_request_id()
    await raw.send(protocol.GetStatus(request_id))
    reply = await raw.reply()
    assert isinstance(reply, protocol.Status) and reply.id == request_id


@pytest.mark.parametrize("body, code, request_id", [
    (b"\x00\x01garbage", "malformed", None),
    (b'{"type": "complete", "id": 71', "malformed", None),
    (b'{"type": "frobnicate", "id": 72}', "unknown_type", 72),
    (b'{"type": "complete", "id": 73, "document": "d\xff\xfe", "prefix": "x"}', "malformed", 73),
    (b'{"type": "complete", "id": 74, "document": "d", "prefix": "x", "max_tokens": -5}', "invalid", 74),
    (b'{"type": "complete", "id": 75, "document": "d", "prefix": "x", "temperature": "hot"}', "invalid", 75),
    (b'{"type": "complete", "id": 76, "document": "d", "prefix": "x", "surprise": 1}', "invalid", 76),
    (b'{"type": "complete", "id": 77, "document": "d", "text": "abc", "cursor": 9}', "bad_request", 77),
    (b'{"type": "complete", "id": 78, "document": "d", "text": "abc", "prefix": "a"}', "bad_request", 78),
    (b'{"type": "complete", "id": 79, "document": "d", "prefix": "x", "max_tokens": 100000}', "bad_request", 79),
    (b'[1, 2, 3]', "invalid", None),
    (b'', "malformed", None),
])
async def test_bad_frames_get_an_error_and_the_connection_lives(daemon, body, code, request_id):
    raw = await Raw.unix(daemon)
    raw.send_body(body)
    reply = await raw.reply()
    assert isinstance(reply, protocol.Error), reply
    assert (reply.code, reply.id) == (code, request_id), reply
    await still_serving(raw)
    await raw.close()


async def test_an_oversized_frame_is_skipped_not_read(daemon):
    raw = await Raw.unix(daemon)
    limit = daemon.config().daemon.max_frame_bytes
    raw.send_body(b"x" * (limit + 1))
    reply = await raw.reply()
    assert isinstance(reply, protocol.Error) and reply.code == "frame_too_large"
    await still_serving(raw)     # the oversized body was consumed: the stream is still in step
    await raw.close()


async def test_the_handshake_comes_first_and_checks_the_version(daemon):
    raw = await Raw.unix(daemon, hello=False)
    await raw.send(protocol.GetStatus(5))
    reply = await raw.reply()
    assert isinstance(reply, protocol.Error) and (reply.code, reply.id) == ("handshake", 5)
    await raw.send(protocol.Hello(protocol.VERSION + 1))
    reply = await raw.reply()
    assert isinstance(reply, protocol.Error) and reply.code == "version"
    assert await raw.reader.read() == b"", "a client of another version is disconnected"
    await still_serving(await Raw.unix(daemon))


async def test_a_refused_hello_mid_connection_still_answers_the_request_in_flight(daemon):
    """Found by the fuzzer: a Hello of another version after a Complete closed the connection
    before the Complete's reply, which the client was owed."""
    raw = await Raw.unix(daemon)
    request = long_request("file:///refused-mid-way.py")
    await raw.send(request)
    await raw.send(protocol.Hello(protocol.VERSION + 1))
    replies = [await raw.reply(), await raw.reply()]
    assert {type(r) for r in replies} == {protocol.Error, protocol.CompletionReply}, replies
    (completion,) = [r for r in replies if isinstance(r, protocol.CompletionReply)]
    assert completion.id == request.id and completion.outcome == "cancelled"
    assert await raw.reader.read() == b"", "then it is disconnected"


async def test_a_duplicate_id_in_flight_is_refused(daemon):
    raw = await Raw.unix(daemon)
    request_id = new_request_id()
    first = protocol.Complete(id=request_id, document="file:///dup.py", prefix="def f(x):\n    ", max_tokens=64)
    await raw.send(first)
    await raw.send(msgspec.structs.replace(first, document="file:///dup2.py"))
    replies = [await raw.reply(), await raw.reply()]
    codes = sorted(getattr(r, "code", None) or r.outcome for r in replies)
    assert codes == ["done", "duplicate_id"], replies
    await raw.close()


async def test_a_garbage_flood_does_not_stop_the_daemon(daemon, client):
    raw = await Raw.unix(daemon)
    for n in range(50):
        raw.send_body(bytes(range(256)) * (n % 4))
    for _ in range(50):
        assert isinstance(await raw.reply(), protocol.Error)
    await raw.close()
    truncated = await Raw.unix(daemon)
    truncated.send_body(b"{", length=1000)       # then hang up mid-frame
    await truncated.close()
    assert (await client.status()).pid == client.welcome.pid


async def test_tcp_on_loopback_needs_the_token(daemon):
    config = daemon.config()
    port = config.daemon.tcp_port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    with pytest.raises(DaemonError) as refused:
        await Client.handshake(reader, writer, "not-the-token", config.daemon.max_frame_bytes)
    assert refused.value.code == "unauthorized"

    token = read_token(daemon.paths().token, make=False)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = await Client.handshake(reader, writer, token, config.daemon.max_frame_bytes)
    assert (await client.status()).tcp_port == port
    await client.close()


async def test_a_client_without_the_socket_falls_back_to_tcp(daemon, tmp_path):
    elsewhere = tmp_path / "config.toml"
    elsewhere.write_text(daemon.config_path.read_text().replace(
        "[daemon]\n", f'[daemon]\nsocket = "{tmp_path}/none.sock"\ntoken_file = "{daemon.paths().token}"\n'))
    client = await Client.connect(load_config(elsewhere))
    reply = await client.complete(protocol.Complete(id=new_request_id(), document="file:///tcp.py",
                                                    prefix="def f(x):\n    return ", max_tokens=4))
    assert reply.outcome == "done"
    await client.close()


def test_frames_round_trip_every_message():
    messages = [protocol.Hello(1, "x", "t"), protocol.Cancel(3), protocol.GetStatus(4), protocol.Shutdown(5),
                protocol.Complete(id=6, document="d", text="ab", cursor=1, extras=[protocol.Extra("p", "t")])]
    for message in messages:
        framed = protocol.pack(message)
        assert int.from_bytes(framed[:4], "big") == len(framed) - 4
        assert protocol.decode_request(framed[4:]) == message


def test_split_gives_prefix_and_suffix_or_says_what_is_wrong():
    assert protocol.Complete(id=1, document="d", text="hello", cursor=2).split() == ("he", "llo")
    assert protocol.Complete(id=1, document="d", prefix="a", suffix="b").split() == ("a", "b")
    with pytest.raises(ValueError, match="past the end"):
        protocol.Complete(id=1, document="d", text="hi", cursor=3).split()
    with pytest.raises(ValueError, match="needs text and cursor"):
        protocol.Complete(id=1, document="d", text="hi").split()


@pytest.mark.parametrize("sent,cut_s,deadline_s", [({}, 0.4, 0.5), ({"cut_ms": 0, "deadline_ms": 0}, None, None),
                                                   ({"cut_ms": 250, "deadline_ms": 100}, 0.25, 0.1)])
def test_a_request_takes_the_configs_time_limits_unless_it_says(sent, cut_s, deadline_s):
    from specd.daemon.config import CompletionSettings
    from specd.daemon.jobs import engine_request

    request = engine_request(protocol.Complete(id=1, document="d", prefix="x = ", **sent), CompletionSettings())
    assert (request.cut_s, request.deadline_s) == (cut_s, deadline_s)
