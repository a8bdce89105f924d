"""The server backend (daemon/remote.py) against a scripted /v1/completions server: what it
posts, the local engine's text stop rules on the stream, the server's timings in the stats, and a
server that is down or failing answered with an empty completion that says why."""

from __future__ import annotations

import socket
import time

import msgspec
import pytest

from specd.daemon.config import Config, ConfigError
from specd.daemon.remote import RemoteBackend
from specd.decoding.request import CompletionRequest
from tests.daemon.openai_server import OpenAIServer, Script


def backend(url: str, **settings) -> RemoteBackend:
    lines = "".join(f"{key} = {msgspec.json.encode(value).decode()}\n" for key, value in settings.items())
    text = f'[backend]\nkind = "server"\nurl = "{url}"\nmodel = "qwen2.5-coder-1.5b-instruct"\n{lines}'
    return RemoteBackend(msgspec.toml.decode(text.encode(), type=Config))


def test_it_posts_the_fim_prompt_greedy_and_streamed():
    with OpenAIServer() as server:
        result = backend(server.url).complete(CompletionRequest("def add(a, b):\n", "\nprint(1)\n", max_tokens=9),
                                              lambda: False)
    (asked,) = server.script.asked
    assert asked == {"model": "qwen2.5-coder-1.5b-instruct", "max_tokens": 9, "temperature": 0.0, "stream": True,
                     "prompt": "<|fim_prefix|>def add(a, b):\n<|fim_suffix|>\nprint(1)\n<|fim_middle|>"}
    assert (result.outcome, result.text, result.stop_reason) == ("done", "def add(a, b):\n    return a + b\n",
                                                                 "stop_token")
    assert "Authorization" not in server.script.headers[0]


def test_the_key_comes_from_the_environment_variable_named(monkeypatch):
    monkeypatch.setenv("SPECD_TEST_KEY", "secret-1")
    with OpenAIServer() as server:
        backend(server.url, api_key_env="SPECD_TEST_KEY").complete(CompletionRequest("x"), lambda: False)
    assert server.script.headers[0]["Authorization"] == "Bearer secret-1"
    monkeypatch.delenv("SPECD_TEST_KEY")
    with pytest.raises(ConfigError, match="backend.api_key_env names SPECD_TEST_KEY, which is not set"):
        backend("http://127.0.0.1:1", api_key_env="SPECD_TEST_KEY")


def test_single_line_ends_at_the_line_end_and_closes_the_stream():
    with OpenAIServer(Script(delay_s=0.02)) as server:
        result = backend(server.url).complete(CompletionRequest("x", single_line=True), lambda: False)
        for _ in range(200):
            if server.script.left_early:
                break
            time.sleep(0.01)
    assert (result.text, result.stop_reason) == ("def add(a, b):", "end_of_line")
    assert server.script.left_early == 1, "the server saw the stream closed before its end"


def test_a_line_repeating_the_suffix_is_dropped():
    with OpenAIServer(Script(pieces=["    x = 1\n", "    return x\n", "    y\n"])) as server:
        result = backend(server.url).complete(CompletionRequest("def f():\n", "    return x\n"), lambda: False)
    assert (result.text, result.stop_reason) == ("    x = 1\n", "repeats_suffix")


def test_the_token_limit_is_the_servers():
    with OpenAIServer() as server:
        result = backend(server.url).complete(CompletionRequest("x", max_tokens=2), lambda: False)
    assert (result.text, result.stop_reason) == ("def add", "max_tokens")


def test_the_servers_own_timings_are_the_stats():
    with OpenAIServer() as server:
        s = backend(server.url).complete(CompletionRequest("x"), lambda: False).stats
    assert s.server_timings and (s.prefill_ms, s.verify_ms) == (12.5, 30.0)
    assert (s.reused_tokens, s.prefilled_tokens, s.prompt_tokens, s.new_tokens) == (3, 40, 43, 7)


def test_without_timings_the_stream_is_timed_here():
    with OpenAIServer(Script(timings=False, delay_s=0.01)) as server:
        s = backend(server.url).complete(CompletionRequest("x"), lambda: False).stats
    assert not s.server_timings and s.prefill_ms > 5 and s.verify_ms > 30


def test_a_cancel_closes_the_stream_at_once():
    with OpenAIServer(Script(pieces=[" x"] * 500, delay_s=0.01)) as server:
        b = backend(server.url)
        started = time.monotonic()
        result = b.complete(CompletionRequest("x", max_tokens=500), lambda: b.passes() >= 5)
    assert result.outcome == "cancelled" and b.passes() <= 6
    assert time.monotonic() - started < 2


def test_a_server_that_is_down_gives_an_empty_answer_that_says_why_and_is_found_again():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = backend(f"http://127.0.0.1:{port}")
    assert b.describe().device_reason == "server: no request yet"
    down = b.complete(CompletionRequest("x"), lambda: False)
    assert (down.outcome, down.text, down.stop_reason) == ("done", "", "server_error")
    assert "cannot connect to http://127.0.0.1" in down.error
    assert "NOT answering since" in b.describe().device_reason and "cannot connect" in b.describe().device_reason
    with OpenAIServer() as server:
        b.endpoint = backend(server.url).endpoint   # the same server back, on its new port
        assert b.complete(CompletionRequest("x"), lambda: False).error is None
    assert b.describe().device_reason.startswith("server: answering since")


def test_an_http_error_is_said():
    with OpenAIServer(Script(status=503)) as server:
        result = backend(server.url).complete(CompletionRequest("x"), lambda: False)
    assert result.text == "" and "HTTP 503: the model is not loaded" in result.error


def test_max_in_flight_holds_a_request_until_a_slot_is_free():
    with OpenAIServer() as server:
        b = backend(server.url, max_in_flight=1)
        assert b.slots.acquire(timeout=1)   # one request is at the server
        result = b.complete(CompletionRequest("x"), lambda: True)
        b.slots.release()
    assert result.outcome == "cancelled" and not server.script.asked, "it waited, and its cancel ended the wait"


def test_a_failure_is_traced_as_an_error_and_never_kept():
    from specd.daemon import jobs, protocol
    from specd.daemon.answers import Answers, answer_key
    from specd.daemon.scheduler import Job
    from specd.decoding.request import Completion

    message = protocol.Complete(id=1, document="d", prefix="x")
    job = Job(0, message, CompletionRequest("x", document="d"))
    job.started = job.finished = time.perf_counter()
    job.result = Completion("", [], "done", "server_error", error="the inference server: cannot connect")
    answers = Answers()
    answers.put("d", answer_key(job.request), job.result)
    assert answers.get("d", answer_key(job.request)) is None
    line = jobs.trace_record(job, time.perf_counter())
    assert (line.outcome, line.error) == ("error", "the inference server: cannot connect")
    reply = jobs.reply(job)
    assert (reply.outcome, reply.text, reply.stop_reason) == ("done", "", "server_error"), "the editor shows nothing"
