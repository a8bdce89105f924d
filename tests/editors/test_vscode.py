"""editors/vscode: its build and package (where npm is), and end to end in a real VS Code:
code-server with the extension installed from its .vsix, driven by Debian's headless Chromium
through playwright-core. Type, see the ghost text from `specd lsp` (which starts its own daemon on
the built-in pair), accept it with Tab, save, check the file on disk."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "editors" / "vscode"
TOOLS = ROOT / ".tools"
CODE_SERVER = TOOLS / "code-server" / "node_modules" / "code-server" / "out" / "node" / "entry.js"
PLAYWRIGHT = TOOLS / "playwright" / "node_modules"
DRIVER = Path(__file__).with_name("vscode") / "type_and_accept.js"
SPECD = Path(sys.executable).with_name("specd")
CODE_SERVER_VSCODE = (1, 100)  # code-server 4.100.3 is VS Code 1.100.3
INSTALL_HINT = "run .ci/install-editors"

SOURCE = '''def mean(values):
    """Return the arithmetic mean of values."""
    return sum(values) / len(values)


def variance(values):
    """Return the population variance of values."""
    m = mean(values)
'''
TYPED = "    return sum"
TYPED_NEXT = "\n\ndef spread(values):\nreturn max("   # VS Code indents after the colon itself
GHOST_WAIT_S = 300  # the daemon starts on the first request; a CPU completion takes seconds
DRIVER_TIMEOUT_S = GHOST_WAIT_S + 300

# Tab must accept the ghost text (no suggest widget), what is typed must stay as typed (no
# auto-closed brackets), and only Ctrl+S may write the file (VS Code in a browser autosaves).
SETTINGS = {
    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
    "editor.suggestOnTriggerCharacters": False,
    "editor.wordBasedSuggestions": "off",
    "editor.inlineSuggest.enabled": True,
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "files.autoSave": "off",
    "security.workspace.trust.enabled": False,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "extensions.ignoreRecommendations": True,
    "telemetry.telemetryLevel": "off",
}


def build_skip_reason() -> str | None:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"cannot build editors/vscode: {' and '.join(missing)} not on PATH" if missing else None


def e2e_skip_reason() -> str | None:
    """Which tool of the real-editor test is missing, if one is."""
    if reason := build_skip_reason():
        return reason
    if not CODE_SERVER.exists():
        return f"no code-server in {TOOLS.relative_to(ROOT)}/ ({INSTALL_HINT})"
    if not (PLAYWRIGHT / "playwright-core").exists():
        return f"no playwright-core in {TOOLS.relative_to(ROOT)}/ ({INSTALL_HINT})"
    if shutil.which("chromium") is None:
        return f"no chromium on PATH (Debian's chromium package; {INSTALL_HINT} as root)"
    return None


@pytest.fixture(scope="module")
def vsix() -> Path:
    if reason := build_skip_reason():
        pytest.skip(reason)
    out = EXTENSION / "specd.vsix"
    out.unlink(missing_ok=True)
    run = subprocess.run([str(EXTENSION / "build.sh")], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"build.sh failed\n{run.stdout}\n{run.stderr}"
    assert out.exists(), f"build.sh made no {out.name}\n{run.stdout}"
    return out


def vsix_files(vsix: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(vsix) as z:
        return {name: z.read(name) for name in z.namelist()}


def test_the_package_declares_its_settings(vsix):
    manifest = json.loads(vsix_files(vsix)["extension/package.json"])
    settings = manifest["contributes"]["configuration"]["properties"]
    assert settings["specd.path"]["type"] == "string"
    assert settings["specd.path"]["default"] == "specd"
    languages = settings["specd.languages"]
    assert languages["type"] == "array" and languages["items"] == {"type": "string"}
    assert {"python", "javascript", "typescript", "go", "rust", "c", "cpp"} <= set(languages["default"])


def test_the_package_declares_the_trigger_settings_and_the_suggest_key(vsix):
    """The `[trigger]` knobs as settings (defaults: the config's own), and "specd: Suggest here"
    on Alt+\\, which asks VS Code for an inline suggestion by hand."""
    manifest = json.loads(vsix_files(vsix)["extension/package.json"])
    settings = manifest["contributes"]["configuration"]["properties"]
    assert {key: (settings[key]["type"], settings[key]["default"]) for key in settings if ".trigger." in key} == {
        "specd.trigger.auto": ("boolean", True), "specd.trigger.delayMs": ("integer", 0),
        "specd.trigger.languages": ("object", {}), "specd.trigger.maxLineSuffix": ("integer", -1)}
    assert {"command": "specd.trigger", "title": "specd: Suggest here"} in manifest["contributes"]["commands"]
    [binding] = [k for k in manifest["contributes"]["keybindings"] if k["command"] == "specd.trigger"]
    assert binding["key"] == "alt+\\"
    bundle = vsix_files(vsix)["extension/" + manifest["main"].removeprefix("./")].decode()
    assert "editor.action.inlineSuggest.trigger" in bundle and "max_line_suffix" in bundle


def test_the_package_declares_the_partial_accept_commands(vsix):
    """Ctrl+Right (Cmd+Right on a Mac) while a suggestion shows is specd's "accept next word", where
    VS Code binds its own, so that what it takes is counted; "accept next line" beside it."""
    manifest = json.loads(vsix_files(vsix)["extension/package.json"])
    bindings = {k["command"]: k for k in manifest["contributes"]["keybindings"]}
    assert bindings["specd.acceptNextWord"]["key"] == "ctrl+right"
    assert bindings["specd.acceptNextWord"]["mac"] == "cmd+right"
    assert "specd.acceptNextLine" in bindings
    assert all("inlineSuggestionVisible" in bindings[c]["when"] for c in ("specd.acceptNextWord", "specd.acceptNextLine"))
    bundle = vsix_files(vsix)["extension/" + manifest["main"].removeprefix("./")].decode()
    assert "textDocument/didPartiallyAcceptCompletion" in bundle and "editor.action.inlineSuggest.acceptNext" in bundle


def test_the_package_binds_escape_to_dismiss_while_a_suggestion_shows(vsix):
    manifest = json.loads(vsix_files(vsix)["extension/package.json"])
    bindings = {k["command"]: k for k in manifest["contributes"]["keybindings"]}
    assert bindings["specd.dismiss"]["key"] == "escape" and "inlineSuggestionVisible" in bindings["specd.dismiss"]["when"]
    bundle = vsix_files(vsix)["extension/" + manifest["main"].removeprefix("./")].decode()
    assert "specd/didDismissCompletion" in bundle and "editor.action.inlineSuggest.hide" in bundle


def test_the_package_activates_for_its_languages(vsix):
    manifest = json.loads(vsix_files(vsix)["extension/package.json"])
    events = manifest["activationEvents"]
    default_languages = manifest["contributes"]["configuration"]["properties"]["specd.languages"]["default"]
    assert {f"onLanguage:{language}" for language in default_languages} <= set(events)
    # A language added in the settings is served too: the extension activates once VS Code is up.
    assert "onStartupFinished" in events


def test_the_package_admits_vscode_1_100(vsix):
    manifest = json.loads(vsix_files(vsix)["extension/package.json"])
    engine = manifest["engines"]["vscode"]
    assert engine.startswith("^"), engine
    major, minor = (int(part) for part in engine[1:].split(".")[:2])
    assert (major, minor) <= CODE_SERVER_VSCODE, f"{engine} excludes VS Code 1.100 (code-server 4.100.3)"


def test_the_package_carries_a_self_contained_bundle(vsix):
    files = vsix_files(vsix)
    manifest = json.loads(files["extension/package.json"])
    main = "extension/" + manifest["main"].removeprefix("./")
    assert main in files, f"{main} is not in the package: {sorted(files)}"
    assert not any("/node_modules/" in name for name in files), "the bundle should need no node_modules"
    bundle = files[main].decode()
    # vscode-languageclient is bundled in, and the server is launched as `<specd.path> lsp`.
    assert 'require("vscode-languageclient' not in bundle
    assert "textDocument/inlineCompletion" in bundle
    assert '"lsp"' in bundle


# -- end to end in code-server ---------------------------------------------------------------

def isolated_env(home: Path, runtime: Path) -> dict[str, str]:
    """HOME, config, state, data and runtime dirs under `home`; the cache (the models) stays."""
    config = home / "specd.toml"
    # the whole 16 tokens at once (no cut at a word or line end on a slow machine, no end where
    # the target doubts: it doubts after `sum((`): more than one word, so that Ctrl+Right leaves a rest
    config.write_text("[completion]\nmax_tokens = 16\ncut_ms = 0\nfirst_line_ms = 0\n"
                      "[engine]\nmin_probability = 0\nmin_first_probability = 0\n")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env = dict(os.environ, HOME=str(home / "home"), SPECD_CONFIG=str(config),
               XDG_RUNTIME_DIR=str(runtime), XDG_CACHE_HOME=cache)
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        env[var] = str(home / var.lower())
    (home / "home").mkdir()
    return env


def install_extension(vsix: Path, data: Path, extensions: Path, env: dict[str, str]) -> None:
    run = subprocess.run(["node", str(CODE_SERVER), "--user-data-dir", str(data),
                          "--extensions-dir", str(extensions), "--install-extension", str(vsix)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and (extensions / "extensions.json").exists(), \
        f"code-server --install-extension failed\n{run.stdout}\n{run.stderr}"


def start_code_server(folder: Path, data: Path, extensions: Path, env: dict[str, str],
                      log: Path) -> tuple[subprocess.Popen, str]:
    """code-server on a port of its choosing, and the URL of the window on `folder`."""
    cmd = ["node", str(CODE_SERVER), "--auth", "none", "--bind-addr", "127.0.0.1:0",
           "--user-data-dir", str(data), "--extensions-dir", str(extensions),
           "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
           "--disable-getting-started-override", str(folder)]
    with log.open("w") as out:
        server = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        if listening := re.search(r"HTTP server listening on (http://\S+/)", log.read_text()):
            return server, f"{listening[1]}?folder={folder}"
        time.sleep(0.5)
    stop_code_server(server)
    raise AssertionError(f"code-server did not start\n{log.read_text()}")


def stop_code_server(server: subprocess.Popen) -> None:
    """code-server with its extension host and `specd lsp`: they share its process group."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    except ProcessLookupError:  # the whole group is gone already
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
    server.wait()


def drive(url: str, source: Path, home: Path, env: dict[str, str]) -> str:
    """Run the browser script; its output, whose last JSON line is the result."""
    options = {"url": url, "chromium": shutil.which("chromium"), "path": str(source),
               "userDataDir": str(home / "chromium"), "typed": TYPED, "typedNext": TYPED_NEXT,
               "ghostWaitMs": GHOST_WAIT_S * 1000, "screenshot": str(home / "failure.png")}
    try:
        run = subprocess.run(["node", str(DRIVER), json.dumps(options)],
                             env=env | {"NODE_PATH": str(PLAYWRIGHT)},
                             capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
        return run.stdout + run.stderr
    except subprocess.TimeoutExpired as e:  # run() has killed the script; Chromium dies with it
        return f"the driver was killed after {DRIVER_TIMEOUT_S} s\n{e.stdout or ''}{e.stderr or ''}"


def logs(home: Path) -> str:
    """The tails of code-server's log, the language client's and the daemon's."""
    paths = [home / "code-server.log", *sorted(home.glob("data/logs/*/exthost*/specd.specd/*.log")),
             home / "xdg_state_home" / "specd" / "specd.log"]
    return "\n".join(f"== {path.relative_to(home)}\n{path.read_text()[-4000:]}"
                     for path in paths if path.exists())


@pytest.fixture(scope="module")
def played(vsix, tmp_path_factory):
    if reason := e2e_skip_reason():
        pytest.skip(reason)
    probe = subprocess.run([str(SPECD), "lsp", "--help"], capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, f"`{SPECD} lsp` does not run\n{probe.stdout}{probe.stderr}"
    home = tmp_path_factory.mktemp("vscode")
    # A runtime dir of its own (short: it holds a Unix socket): this test's daemon is its own.
    runtime = Path(tempfile.mkdtemp(prefix="specd-vscode-"))
    env = isolated_env(home, runtime)
    data, extensions, folder = home / "data", home / "extensions", home / "work"
    for path in (data / "User", extensions, folder):
        path.mkdir(parents=True)
    (data / "User" / "settings.json").write_text(json.dumps(SETTINGS | {"specd.path": str(SPECD)}))
    source = folder / "stats.py"
    source.write_text(SOURCE)
    server, status = None, ""
    try:
        install_extension(vsix, data, extensions, env)
        server, url = start_code_server(folder, data, extensions, env, home / "code-server.log")
        output = drive(url, source, home, env)
    finally:
        if server is not None:
            stop_code_server(server)
        # what the daemon counted of the suggestions shown and taken, before it goes
        status = subprocess.run([str(SPECD), "status"], env=env, capture_output=True, text=True, timeout=120).stdout
        subprocess.run([str(SPECD), "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(runtime, ignore_errors=True)
    lines = [line for line in output.splitlines() if line.startswith("{")]
    assert lines, f"the driver wrote no result\n{output}\n{logs(home)}"
    result = json.loads(lines[-1])
    assert result.get("error") is None, \
        f"{result['error']}\nscreenshot: {home / 'failure.png'}\n{output}\n{logs(home)}"
    return result | {"saved": source.read_text(), "status": status}


@pytest.mark.real
def test_typing_shows_ghost_text(played):
    assert played["ghost"].strip(), played


@pytest.mark.real
def test_tab_accepts_the_ghost_text_and_ctrl_s_saves_it(played):
    saved = played["saved"]
    assert saved.startswith(SOURCE + TYPED), saved
    accepted = saved[len(SOURCE + TYPED):]
    assert accepted.split("\n")[0] == played["ghost"].split("\n")[0], (accepted, played["ghost"])


@pytest.mark.real
def test_the_status_bar_shows_specd_up_with_the_last_round_trip_and_opens_the_trace_page(played):
    assert re.fullmatch(r"specd \d+ ms", played["statusBar"]), played["statusBar"]
    assert played["tracePage"] and not any("specd" in toast for toast in played["errors"]), played["errors"]


def next_word(text: str) -> str:
    """What VS Code's "accept next word" takes of this suggestion: blanks, then a word."""
    return re.match(r"\s*(\w+|[^\w\s]+)", text).group()


@pytest.mark.real
def test_ctrl_right_takes_the_next_word_and_the_rest_stays_shown(played):
    word = next_word(played["ghost"])
    assert played["afterWord"].startswith(SOURCE + TYPED + word), (played["afterWord"], played["ghost"])
    assert played["rest"] and played["ghost"].startswith(word + played["rest"].split("\n")[0]), played


@pytest.mark.real
def test_the_suggestion_taken_is_counted_in_specd_status(played):
    """Ctrl+Right is specd's command, which runs VS Code's "accept next word" and sends Copilot's
    didPartiallyAcceptCompletion; VS Code runs the item's command after Tab (vscode-languageclient
    forwards it as workspace/executeCommand): the daemon counts a part and a whole, of the same
    suggestion or of the rest the server answered after the word."""
    taken = next(line for line in played["status"].splitlines() if "since start" in line)
    assert re.search(r" [12] taken \(\d+%\): 1 whole, 1 in part", taken), played["status"]


@pytest.mark.real
def test_escape_dismisses_the_suggestion_and_specd_status_counts_it(played):
    """Escape while ghost text shows is specd's "dismiss": VS Code's own hide, and
    specd/didDismissCompletion for the suggestion, counted as escaped."""
    assert played["escaped"], played
    taken = next(line for line in played["status"].splitlines() if "since start" in line)
    dismissed = re.search(r"; (\d+) dismissed \((\d+) escaped\)", taken)
    assert dismissed and int(dismissed.group(2)) >= 1, played["status"]
