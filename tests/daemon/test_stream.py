"""The streamed POST and its server-sent events (daemon/stream.py), without a model: the event
parser on bytes cut anywhere, URLs, and the HTTP framing against a scripted server."""

from __future__ import annotations

import socket
import threading

import pytest

from specd.daemon.stream import Cancelled, Endpoint, SseParser, StreamError, post_events
from tests.daemon.openai_server import OpenAIServer, Script

STREAM = (b'data: {"a": 1}\n\n'
          b': a comment\r\n'
          b'event: completion\ndata: {"b":\ndata: 2}\n\n'
          b'data: [DONE]\n\n')


def test_events_are_the_same_however_the_bytes_are_cut():
    whole = SseParser().feed(STREAM)
    assert whole == ['{"a": 1}', '{"b":\n2}', "[DONE]"]
    for size in (1, 2, 3, 7):
        parser = SseParser()
        events = [e for i in range(0, len(STREAM), size) for e in parser.feed(STREAM[i:i + size])]
        assert events == whole, size


def test_an_event_is_not_given_before_its_blank_line():
    parser = SseParser()
    assert parser.feed(b'data: {"a": 1}\n') == []
    assert parser.feed(b"\n") == ['{"a": 1}']


def test_an_error_line_is_an_event_that_says_so():
    assert SseParser().feed(b'error: {"message": "out of memory"}\n') == ['error:{"message": "out of memory"}']


def test_utf8_split_across_reads_is_kept_whole():
    data = 'data: {"text": "é€"}\n\n'.encode()
    parser = SseParser()
    events = [e for i in range(len(data)) for e in parser.feed(data[i:i + 1])]
    assert events == ['{"text": "é€"}']


@pytest.mark.parametrize("url, expected", [
    ("http://127.0.0.1:8080", Endpoint("http", "127.0.0.1", 8080, "")),
    ("https://gpu.example.org/", Endpoint("https", "gpu.example.org", 443, "")),
    ("http://host/openai/", Endpoint("http", "host", 80, "/openai")),
])
def test_urls(url, expected):
    assert Endpoint.parse(url) == expected


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "ftp://host", "http://", "http://h:99999",
                                 "http://user:pw@host", "http://host/?q=1"])
def test_bad_urls_are_refused(url):
    with pytest.raises(ValueError):
        Endpoint.parse(url)


@pytest.mark.parametrize("chunked", [True, False])
def test_events_from_a_server_chunked_or_until_close(chunked):
    with OpenAIServer(Script(chunked=chunked)) as server:
        events = list(post_events(Endpoint.parse(server.url), "/v1/completions", {"prompt": "x"}, {"X-Key": "k"},
                                  5.0, lambda: False))
    assert events[-1] == "[DONE]" and len(events) == len(server.script.pieces) + 1
    assert server.script.asked == [{"prompt": "x"}] and server.script.headers[0]["X-Key"] == "k"


def test_an_http_error_says_the_servers_message():
    with OpenAIServer(Script(status=503)) as server, pytest.raises(StreamError, match="HTTP 503: the model is not"):
        list(post_events(Endpoint.parse(server.url), "/v1/completions", {}, {}, 5.0, lambda: False))


def test_nothing_listening_is_a_stream_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StreamError, match="cannot connect to http://127.0.0.1"):
        list(post_events(Endpoint.parse(f"http://127.0.0.1:{port}"), "/v1/completions", {}, {}, 5.0, lambda: False))


def test_a_silent_server_times_out_and_a_cancel_lands_while_waiting():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        endpoint = Endpoint.parse(f"http://127.0.0.1:{listener.getsockname()[1]}")
        with pytest.raises(StreamError, match="no answer within 0.2 s"):
            list(post_events(endpoint, "/v1/completions", {}, {}, 0.2, lambda: False))
        flag = threading.Event()
        threading.Timer(0.1, flag.set).start()
        with pytest.raises(Cancelled):
            list(post_events(endpoint, "/v1/completions", {}, {}, 30.0, flag.is_set))
