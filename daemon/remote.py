"""The server backend: completions from an inference server's OpenAI-style /v1/completions.

specd builds the FIM prompt itself (decoding/textprompt.py, the family's template) and posts it
with `stream: true`; the server tokenizes, caches and speculates as it does (llama.cpp's server,
vLLM with --enable-prefix-caching, SGLang). Each streamed piece goes through the local engine's
text stop rules (decoding/stops.py: single line, text repeating the suffix, the first-line
deadline and the cut), and the server's own end tokens and token limit end it there. A request
the scheduler cancels closes its connection at the next poll (daemon/stream.py), which is how
the server learns to stop.

What can go wrong at the server (down, an HTTP error, a broken stream, a timeout) is said, not
raised: the reply is an empty completion whose `error` the trace records, the editor shows
nothing, and `specd status` says since when and why the server does not answer. Nothing waits
longer than backend.timeout_s for the server's next bytes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import msgspec

from specd.daemon.backend import Described
from specd.daemon.config import BackendSettings, Config, ConfigError
from specd.daemon.stream import Cancelled, Endpoint, StreamError, post_events
from specd.decoding.prompt import Budget
from specd.decoding.request import Completion, CompletionRequest
from specd.decoding.stats import Stats
from specd.decoding.stops import Stopper, StopRules
from specd.decoding.textprompt import fim_text, guess_family, template_named

log = logging.getLogger("specd.remote")
SUFFIX_TOKENS = 256   # suffix_tokens = -1 at a server: a GPU's default (decoding/settings.py)


class Timings(msgspec.Struct):
    """llama.cpp's server's own figures, in its last event."""
    cache_n: int = 0               # prompt tokens whose KV it kept from before
    prompt_n: int = 0              # prompt tokens it computed
    prompt_ms: float = 0.0
    predicted_n: int = 0
    predicted_ms: float = 0.0


class Choice(msgspec.Struct):
    text: str = ""
    finish_reason: str | None = None   # "stop" (an end token or stop string), "length"


class Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Chunk(msgspec.Struct):
    """One streamed event of /v1/completions (fields not named here are ignored)."""
    choices: list[Choice] = []
    usage: Usage | None = None
    timings: Timings | None = None


_chunk = msgspec.json.Decoder(Chunk)
FINISH = {"stop": "stop_token", "length": "max_tokens"}


class Health:
    """Whether the server answered its last request, since when, and if not, why."""

    def __init__(self):
        self.ok: bool | None = None   # None: asked nothing yet
        self.since = time.time()
        self.reason = ""

    def answered(self) -> None:
        if self.ok is not True:
            log.info("the inference server answers%s", " again" if self.ok is False else "")
            self.ok, self.since, self.reason = True, time.time(), ""

    def failed(self, reason: str) -> None:
        if self.ok is not False or reason != self.reason:
            log.warning("the inference server does not answer: %s", reason)
        if self.ok is not False:
            self.since = time.time()
        self.ok, self.reason = False, reason

    def line(self) -> str:
        at = time.strftime("%H:%M:%S", time.localtime(self.since))
        if self.ok is None:
            return "server: no request yet"
        return f"server: answering since {at}" if self.ok else f"server: NOT answering since {at}: {self.reason}"


class RemoteBackend:
    def __init__(self, config: Config):
        b = self.settings = config.backend
        self.endpoint = Endpoint.parse(b.url)              # checked when the config was read
        self.template = template_named(family_of(b))
        e = config.engine
        self.budget = Budget(e.prefix_tokens, SUFFIX_TOKENS if e.suffix_tokens < 0 else e.suffix_tokens,
                             e.extra_tokens)
        self.headers = {"Authorization": f"Bearer {api_key(b)}"} if b.api_key_env else {}
        self.slots = threading.BoundedSemaphore(b.max_in_flight)
        self.health = Health()
        self._pieces = 0

    def complete(self, request: CompletionRequest, cancelled: Callable[[], bool]) -> Completion:
        started, stats = time.perf_counter(), Stats()
        prompt = fim_text(self.template, self.budget, request.prefix, request.suffix, request.extras)
        stats.tokenize_ms = _ms_since(started)
        while not self.slots.acquire(timeout=0.02):   # backend.max_in_flight at once
            if cancelled():
                return Completion("", [], "cancelled", None, stats)
        try:
            return self._stream(request, prompt, cancelled, stats, started)
        finally:
            self.slots.release()
            stats.total_ms = _ms_since(started)

    def _stream(self, request: CompletionRequest, prompt: str, cancelled: Callable[[], bool], stats: Stats,
                started: float) -> Completion:
        stopper: Stopper | None = None
        sent, first = time.perf_counter(), None
        try:
            for data in post_events(self.endpoint, "/v1/completions", self.body(request, prompt), self.headers,
                                    self.settings.timeout_s, cancelled):
                if data == "[DONE]":
                    break
                chunk = _decode(data)
                self._pieces += 1
                if first is None:
                    first, stopper = time.perf_counter(), Stopper(None, rules(request))
                if self._take(chunk, stopper, stats):
                    break
        except Cancelled:
            _time(stats, sent, first)
            return Completion(stopper.text if stopper else "", [], "cancelled", None, stats)
        except StreamError as error:
            self.health.failed(str(error))
            _time(stats, sent, first)
            return Completion("", [], "done", "server_error", stats, error=f"the inference server: {error}")
        self.health.answered()
        _time(stats, sent, first)
        if stopper is None:
            return Completion("", [], "done", "stop_token", stats)
        return Completion(stopper.text, [], "done", stopper.reason or "stop_token", stats)

    def _take(self, chunk: Chunk, stopper: Stopper, stats: Stats) -> bool:
        """One event into the stop rules and the stats; True once nothing more is wanted."""
        if chunk.timings is not None:
            t = chunk.timings
            stats.server_timings = True
            stats.reused_tokens, stats.prefilled_tokens, stats.new_tokens = t.cache_n, t.prompt_n, t.predicted_n
            stats.prompt_tokens = t.cache_n + t.prompt_n
            stats.prefill_ms, stats.verify_ms = t.prompt_ms, t.predicted_ms
        elif chunk.usage is not None and not stats.server_timings:
            stats.prompt_tokens, stats.new_tokens = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
        if not chunk.choices or stopper.done:
            return False   # a usage-only event, or the last one's figures after the server's own end
        choice = chunk.choices[0]
        stats.target_forwards += 1
        text = choice.text
        cut = min((i for stop in self.template.stops if (i := text.find(stop)) >= 0), default=len(text))
        if text and stopper.push_text(text[:cut]):
            return True    # a text rule ended it: closing the stream stops the server
        if cut < len(text):   # a FIM token written out, by a server that renders special tokens
            stopper.reason = "stop_token"
            return True
        if choice.finish_reason is not None:
            stopper.reason = FINISH.get(choice.finish_reason, choice.finish_reason)
            return chunk.timings is not None   # llama.cpp's figures come with the end; others after it
        return False

    def body(self, request: CompletionRequest, prompt: str) -> dict:
        s = request.sampler
        body = {"model": self.settings.model, "prompt": prompt, "max_tokens": request.max_tokens,
                "temperature": 0.0 if s.greedy else s.temperature, "stream": True}
        if not s.greedy:
            body |= {"top_p": s.top_p, "seed": s.seed}
        return body

    def passes(self) -> int:
        return self._pieces

    def describe(self) -> Described:
        b = self.settings
        return Described(target=f"{b.model} ({self.template.family} FIM)", draft="none (the server's own drafting)",
                         device=b.url, dtype="served", device_reason=self.health.line())

    def close(self) -> None:
        pass   # each request's connection is closed when it ends


def rules(request: CompletionRequest) -> StopRules:
    """The request's text stop rules, timed from the first streamed text, as the local engine's
    are from the end of prefill."""
    now = time.monotonic()
    return StopRules(frozenset(), request.max_tokens, request.single_line,
                     request.suffix if request.stop_at_suffix else "",
                     None if request.deadline_s is None else now + request.deadline_s,
                     None if request.cut_s is None else now + request.cut_s)


def family_of(settings: BackendSettings) -> str:
    """backend.family, or the family the model's name says (the config check made sure there is one)."""
    family = settings.family if settings.family != "auto" else guess_family(settings.model)
    assert family is not None, "the config check refuses a model whose family cannot be told"
    return family


def api_key(settings: BackendSettings) -> str:
    """The key, from the environment variable the config names (the config never holds it)."""
    key = os.environ.get(settings.api_key_env, "")
    if not key:
        raise ConfigError(f"backend.api_key_env names {settings.api_key_env}, which is not set (or empty) "
                          "in the daemon's environment")
    return key


def _decode(data: str) -> Chunk:
    if data.startswith("error:"):
        raise StreamError(f"the server failed mid-reply: {data.removeprefix('error:').strip()[:300]}")
    try:
        return _chunk.decode(data)
    except msgspec.DecodeError as error:
        raise StreamError(f"an event that is not a completion chunk ({error}): {data[:120]!r}") from None


def _time(stats: Stats, sent: float, first: float | None) -> None:
    """Where the server gave no timings: to the first text is its prefill, the rest its decoding."""
    if stats.server_timings:
        return
    now = time.perf_counter()
    stats.prefill_ms = ((first or now) - sent) * 1e3
    stats.verify_ms = (now - first) * 1e3 if first is not None else 0.0


def _ms_since(t: float) -> float:
    return (time.perf_counter() - t) * 1e3
