"""A real daemon whose backend is a server (here a scripted one: tests/daemon/openai_server.py):
it loads no engine library, completes through the server, and `specd status` says whether the
server answers and, when it does not, why; the editor's request gets an empty answer meanwhile."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from specd.daemon.tracing import read_trace
from tests.daemon.openai_server import OpenAIServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fib.py"


def point_at(home, url: str) -> None:
    home.config_path.write_text(home.config_path.read_text()
                                + f'\n[backend]\nkind = "server"\nurl = "{url}"\nmodel = "qwen2.5-coder-1.5b"\n')


def test_a_server_backed_daemon_loads_no_torch_and_says_how_the_server_is(fresh_home):
    with OpenAIServer() as server:
        point_at(fresh_home, server.url)
        assert fresh_home.specd("start").returncode == 0
        maps = Path(f"/proc/{fresh_home.daemon_pid()}/maps").read_text()
        assert "libtorch" not in maps, "a server backend loads no engine library"
        done = fresh_home.specd("complete", "--file", str(EXAMPLE), "--at", "5:1", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"] == "def add(a, b):\n    return a + b\n"
        assert "<|fim_prefix|>" in server.script.asked[0]["prompt"]
        status = fresh_home.specd("status").stdout
        assert f"device    {server.url}: server: answering since" in status, status
        assert "qwen2.5-coder-1.5b (qwen2.5-coder FIM)" in status


def test_a_daemon_whose_server_is_down_answers_empty_and_says_why(fresh_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    point_at(fresh_home, f"http://127.0.0.1:{port}")
    assert fresh_home.specd("start").returncode == 0, "a server that is down does not stop the daemon"
    done = fresh_home.specd("complete", "--file", str(EXAMPLE), "--at", "5:1", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["text"] == "", done.stderr
    status = fresh_home.specd("status").stdout
    assert "server: NOT answering since" in status and "cannot connect" in status, status
    assert "1 errors" in status, status
    (line,) = [r for r in read_trace(fresh_home.paths().trace) if r.outcome == "error"]
    assert "cannot connect" in line.error, "the trace says why"
