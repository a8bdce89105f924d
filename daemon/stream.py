"""A streamed HTTP POST and its server-sent events, on the standard library alone.

The server backend (daemon/remote.py) reads /v1/completions as `text/event-stream`: `data: {json}`
lines, an event ending at a blank line, `data: [DONE]` at the end. Everything is read through
one small loop over a plain (or TLS) socket, never a blocking read: between reads it polls the
caller's cancel check every `POLL_S`, so a superseded request closes its connection at once, even
while the server is still reading the prompt (a closed connection is how a server learns that no
one wants the rest: llama.cpp's server and vLLM then stop generating).
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

POLL_S = 0.02            # how often a wait for bytes looks at the cancel check
ERROR_BODY_BYTES = 4096  # what is read of an error reply, for its message


class StreamError(Exception):
    """The server cannot be reached, answered an error, or broke off; the message says which."""


class Cancelled(Exception):
    """The caller's cancel check said so; the connection is closed."""


@dataclass(frozen=True)
class Endpoint:
    scheme: str   # http | https
    host: str
    port: int
    path: str     # the URL's path, without a trailing slash ("" or "/v1" ...)

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """ValueError says what is wrong with `url`."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        if not parts.hostname:
            raise ValueError(f"{url!r} names no host")
        if parts.query or parts.fragment or parts.username:
            raise ValueError(f"{url!r}: give scheme, host, port and path only")
        port = parts.port or (443 if parts.scheme == "https" else 80)   # ValueError for a bad port
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


class SseParser:
    """Server-sent events from bytes as they arrive: each event's data lines, joined by newlines.
    Comments (`:`) and other fields (`event:`, `id:`) are skipped; `error:` lines (llama.cpp's
    server says a failure mid-stream so) are events of their own, prefixed `error:`."""

    def __init__(self):
        self.pending = b""
        self.data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        events = []
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not line:                              # the end of an event
                if self.data:
                    events.append("\n".join(self.data))
                    self.data = []
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                self.data.append(value)
            elif field == "error":
                events.append(f"error:{value}")
        return events


class Connection:
    """One request's socket, read with the cancel check polled between reads."""

    def __init__(self, endpoint: Endpoint, timeout_s: float, cancelled: Callable[[], bool]):
        self.timeout_s, self.cancelled = timeout_s, cancelled
        self.buffer = b""
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s)
            if endpoint.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=endpoint.host)
        except ssl.SSLError as error:
            raise StreamError(f"TLS with {endpoint.origin} failed: {error.reason or error}") from None
        except OSError as error:
            raise StreamError(f"cannot connect to {endpoint.origin}: {error.strerror or error}") from None
        sock.setblocking(False)
        self.sock = sock

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.settimeout(self.timeout_s)
        try:
            self.sock.sendall(data)
        except OSError as error:
            raise StreamError(f"sending the request failed: {error.strerror or error}") from None
        self.sock.setblocking(False)

    def fill(self) -> bool:
        """Read what has arrived into `buffer`; False at the end of the stream. Waits at most
        timeout_s for a byte, looking at the cancel check every POLL_S."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.cancelled():
                raise Cancelled()
            pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
            if pending or select.select([self.sock], [], [], POLL_S)[0]:
                try:
                    data = self.sock.recv(1 << 16)
                except (ssl.SSLWantReadError, BlockingIOError):
                    continue
                except OSError as error:
                    raise StreamError(f"the connection broke: {error.strerror or error}") from None
                self.buffer += data
                return bool(data)
            if time.monotonic() > deadline:
                raise StreamError(f"no answer within {self.timeout_s:g} s (backend.timeout_s)")

    def line(self) -> bytes:
        while b"\n" not in self.buffer:
            if not self.fill():
                raise StreamError("the server closed the connection mid-reply")
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.rstrip(b"\r")

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not self.fill():
                raise StreamError("the server closed the connection mid-reply")
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def rest(self) -> Iterator[bytes]:
        """Until the server closes."""
        while True:
            if self.buffer:
                out, self.buffer = self.buffer, b""
                yield out
            if not self.fill() and not self.buffer:
                return


def post_events(endpoint: Endpoint, path: str, body: dict, headers: dict[str, str], timeout_s: float,
                cancelled: Callable[[], bool]) -> Iterator[str]:
    """POST `body` as JSON to `path` and yield each server-sent event's data. The connection is
    closed when the caller stops iterating, when `cancelled()` (Cancelled), or on a failure
    (StreamError)."""
    conn = Connection(endpoint, timeout_s, cancelled)
    try:
        payload = json.dumps(body).encode()
        head = [f"POST {endpoint.path}{path} HTTP/1.1", f"Host: {endpoint.host}:{endpoint.port}",
                "Content-Type: application/json", "Accept: text/event-stream", f"Content-Length: {len(payload)}",
                "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
        conn.send(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        status, fields = _head(conn)
        chunks = _chunked(conn) if fields.get("transfer-encoding", "").lower() == "chunked" else _plain(conn, fields)
        if status != 200:
            raise StreamError(f"the server answered HTTP {status}: {_error_message(chunks)}")
        parser = SseParser()
        for chunk in chunks:
            yield from parser.feed(chunk)
    finally:
        conn.close()


def _head(conn: Connection) -> tuple[int, dict[str, str]]:
    status_line = conn.line().decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise StreamError(f"not an HTTP reply: {status_line[:80]!r}")
    fields = {}
    while line := conn.line():
        name, _, value = line.decode("latin-1").partition(":")
        fields[name.strip().lower()] = value.strip()
    return int(parts[1]), fields


def _chunked(conn: Connection) -> Iterator[bytes]:
    while True:
        size_line = conn.line().split(b";")[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise StreamError(f"a bad chunk size {size_line[:20]!r}") from None
        if size == 0:
            return
        yield conn.exactly(size)
        conn.exactly(2)   # the chunk's CRLF


def _plain(conn: Connection, fields: dict[str, str]) -> Iterator[bytes]:
    if "content-length" not in fields:
        yield from conn.rest()
        return
    left = int(fields["content-length"])
    while left > 0:
        if not conn.buffer and not conn.fill():
            raise StreamError("the server closed the connection mid-reply")
        out, conn.buffer = conn.buffer[:left], conn.buffer[left:]
        left -= len(out)
        yield out


def _error_message(chunks: Iterator[bytes]) -> str:
    """An error reply's message: OpenAI's `{"error": {"message": ...}}` where it is that."""
    body = b""
    for chunk in chunks:
        body += chunk
        if len(body) >= ERROR_BODY_BYTES:
            break
    text = body[:ERROR_BODY_BYTES].decode("utf-8", "replace").strip()
    try:
        error = json.loads(text).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return str(message) if message else text
    except (ValueError, AttributeError):
        return text or "(no body)"
