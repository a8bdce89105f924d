"""A scripted OpenAI-style /v1/completions server (the standard library's HTTP server in a
thread), for the server backend's unit tests: it streams the pieces it is given, one event each,
`delay_s` apart, then a last event with llama.cpp's `timings`, and records what it was asked and
whether the client went away mid-stream. The tests against a real server are test_remote_real.py."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Script:
    pieces: list[str] = field(default_factory=lambda: ["def", " add", "(a", ", b", "):\n", "    return", " a + b\n"])
    delay_s: float = 0.0
    finish: str = "stop"
    status: int = 200                 # anything else: an error reply with this status
    chunked: bool = True
    timings: bool = True
    asked: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    left_early: int = 0               # streams whose client closed before the end


class OpenAIServer:
    def __init__(self, script: Script | None = None):
        self.script = script or Script()
        handler = type("Handler", (_Handler,), {"script": self.script})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> OpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    script: Script
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.script.asked.append(body)
        self.script.headers.append(dict(self.headers))
        if self.script.status != 200:
            payload = json.dumps({"error": {"message": "the model is not loaded", "code": self.script.status}})
            self.send_response(self.script.status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding" if self.script.chunked else "Connection",
                         "chunked" if self.script.chunked else "close")
        self.end_headers()
        try:
            for event in self._events(body):
                time.sleep(self.script.delay_s)
                self._write(f"data: {event}\n\n".encode())
            if self.script.chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.script.left_early += 1
        self.close_connection = True

    def _events(self, body: dict):
        pieces = self.script.pieces[: body.get("max_tokens", 10**6)]
        for piece in pieces[:-1]:
            yield json.dumps({"choices": [{"text": piece, "index": 0, "finish_reason": None}]})
        finish = "length" if len(pieces) < len(self.script.pieces) else self.script.finish
        last = {"choices": [{"text": pieces[-1] if pieces else "", "index": 0, "finish_reason": finish}]}
        if self.script.timings:
            last["timings"] = {"cache_n": 3, "prompt_n": 40, "prompt_ms": 12.5, "predicted_n": len(pieces),
                               "predicted_ms": 30.0}
        yield json.dumps(last)
        yield "[DONE]"

    def _write(self, data: bytes) -> None:
        if self.script.chunked:
            data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        self.wfile.write(data)
        self.wfile.flush()
