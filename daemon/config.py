"""Configuration: one TOML file validated into a frozen Struct; every field has a default.

The file is `$SPECD_CONFIG`, else `$XDG_CONFIG_HOME/specd/config.toml` (~/.config/...). It may be
absent. An unknown key or a value of the wrong type is refused with its path, e.g. `$.engine.width`.
`specd config` prints the effective configuration.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import msgspec

from specd.daemon.stream import Endpoint
from specd.decoding.errors import UserError
from specd.decoding.prompt import TEMPLATES
from specd.decoding.registry import DEFAULT_DRAFTER, MODEL_DRAFTERS, DrafterName
from specd.decoding.settings import EngineSettings
from specd.decoding.textprompt import guess_family

# No torch here: `specd status`, `specd stop` and the LSP's client read the config too, and the
# engine's modules are imported only where an engine is built.


# A delay longer than this is a typo (or seconds meant as ms): a pause is about a second.
MAX_DELAY_MS = 10_000


class ConfigError(UserError):
    """The configuration file cannot be read or is invalid; the message names the key."""


class Models(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    target: str = "builtin"          # builtin | builtin:<name> | folder | .gguf file | hub id
    # the same, or "none"; auto: the built-in draft, loaded only where completion.drafter uses a
    # draft model (the default, lookup, does not: the daemon then keeps no draft model resident)
    draft: str = "auto"
    device: str = "auto"             # auto | cpu | cuda | cuda:N
    dtype: str = "auto"              # auto | bf16 | fp16 | fp32
    # the weights: gguf (the file's own blocks on specd's kernels), int4 or int8 (torch's kernels),
    # none (dense); auto: gguf on the CPU (int4 for the target, int8 for the draft, where specd's
    # kernels were not built), none on a GPU
    quantize: Literal["auto", "none", "int8", "int4", "gguf"] = "auto"
    draft_quantize: Literal["auto", "int8", "gguf", "none"] = "auto"
    cache_dir: str = ""              # default: $SPECD_CACHE_DIR, else $XDG_CACHE_HOME/specd


class CompletionSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    max_tokens: int = 48
    drafter: DrafterName = DEFAULT_DRAFTER
    temperature: float = 0.0
    top_p: float = 1.0
    # answer in time: past this many ms a completion ends at its next line end (its first, on this
    # CPU), and the lines after can follow from the next request; 0: no budget
    first_line_ms: int = 500
    # past this many ms with the first line unfinished, a completion ends at its next word end: a
    # partial line shows within a pause, its rest from the next request; 0: never
    cut_ms: int = 400               # measured: specd replay, 0 / 400 / 600 (README, "In time for the pause")


class Daemon(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    socket: str = ""                 # default: $XDG_RUNTIME_DIR/specd/specd.sock, else /tmp/specd-$UID/
    state_dir: str = ""              # log, pid file, trace, token; default: $XDG_STATE_HOME/specd
    tcp_port: int = 0                # 0: no TCP; else 127.0.0.1 only, with a token
    token_file: str = ""             # the TCP token (made owner-only if absent); default: <state_dir>/token
    max_frame_bytes: int = 8 << 20
    trace: bool = True
    trace_max_mb: int = 16           # the trace file and its one rotated predecessor together
    log_max_mb: int = 8              # the log is rotated at start-up past this
    start_timeout_s: int = 600       # `specd start` gives up (and stops the daemon) after this
    handshake_timeout_s: int = 10    # a connection that has not sent hello by then is closed


class Lsp(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    multiline: Literal["auto", "always", "never"] = "auto"
    extra_documents: int = 4         # other open documents passed as context and lookup text


class BackendSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What computes the completions: the models in this process, or an inference server."""
    kind: Literal["local", "server"] = "local"
    # server: its base URL (http:// or https://, TLS as it says); specd posts to <url>/v1/completions
    url: str = ""
    model: str = ""                  # server: the model it serves, as /v1/models names it
    family: str = "auto"             # the FIM template (decoding/prompt.py); auto: told by `model`'s name
    api_key_env: str = ""            # the NAME of the environment variable holding the key (never the key)
    timeout_s: float = 10.0          # the longest wait for the server's next bytes (connect, prompt, a token)
    max_in_flight: int = 1           # the most requests this daemon has at the server at once (the scheduler runs one)


class Trigger(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """When the language server asks the daemon (lsp/trigger.py decides). A manual trigger (the
    editor's "suggest here" key) ignores `auto`, `delay_ms` and `max_line_suffix`: the user asked."""
    auto: bool = True                # false: only a manual trigger asks
    # ms from the last keystroke to the request; a keystroke meanwhile restarts the wait and the
    # stale request is never sent. 0: the most ghost text per pause in `specd replay --delay-ms`
    # 0/100/250/350; 250 spent a third less model time (README, "The delay, measured")
    delay_ms: int = 0
    # languageId -> on/off, "*" for the ids not named (on where absent); off: nothing at all there,
    # not even a manual trigger
    languages: dict[str, bool] = {}
    # no automatic request where the line right of the cursor holds more than this many
    # non-whitespace characters (llama.vim's rule, with 8); -1: never held back, as specd has not
    # yet measured what N costs or saves
    max_line_suffix: int = -1


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    models: Models = Models()
    engine: EngineSettings = EngineSettings()   # the engine's own settings (decoding/settings.py)
    completion: CompletionSettings = CompletionSettings()
    daemon: Daemon = Daemon()
    lsp: Lsp = Lsp()
    backend: BackendSettings = BackendSettings()
    trigger: Trigger = Trigger()

    def draft_to_load(self, drafters: Iterable[str] = ()) -> str:
        """The draft model to load: models.draft, where "auto" is the built-in draft if the default
        drafter or one of `drafters` (a command's own: `specd bench --modes hybrid`) drafts with
        one, else "none"."""
        if self.models.draft != "auto":
            return self.models.draft
        uses = {self.completion.drafter, *drafters} & MODEL_DRAFTERS
        return "builtin" if uses else "none"

    def cache_dir(self) -> Path:
        from specd.models.specs import default_cache_dir

        return Path(self.models.cache_dir).expanduser() if self.models.cache_dir else default_cache_dir()


def config_path() -> Path:
    if os.environ.get("SPECD_CONFIG"):
        return Path(os.environ["SPECD_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base).expanduser() / "specd" / "config.toml"


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    if not path.exists():
        return _validated(Config(), path)
    _check_owner(path)
    try:
        config = msgspec.toml.decode(path.read_bytes(), type=Config)
    except msgspec.ValidationError as error:
        raise ConfigError(f"{path}: {error}") from None
    except (msgspec.DecodeError, OSError) as error:
        raise ConfigError(f"{path}: not readable TOML: {error}") from None
    return _validated(config, path)


def _check_owner(path: Path) -> None:
    """The config names the daemon's socket, folders and models: a file someone else can write
    would let them choose those. Yours or root's, and writable by no one else (group-writable
    only by your own group, as a umask of 002 leaves it)."""
    st = path.stat()
    if st.st_uid not in (os.getuid(), 0):
        raise ConfigError(f"{path} belongs to uid {st.st_uid}, not to you; refusing to read it")
    if st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getgid()):
        raise ConfigError(f"{path} is writable by others (mode {oct(st.st_mode & 0o777)}); `chmod go-w {path}`")


def _validated(config: Config, path: Path) -> Config:
    """Ranges the types alone do not say."""
    e, c, d = config.engine, config.completion, config.daemon
    checks = [
        (1 <= e.width <= 64, "engine.width must be 1..64"),
        (e.prefill_chunk >= 1 or e.prefill_chunk == -1, "engine.prefill_chunk must be -1 (device default) or more"),
        (e.prefix_tokens >= 0 and e.extra_tokens >= 0, "token budgets must not be negative"),
        (e.suffix_tokens >= -1, "engine.suffix_tokens must be -1 (device default) or more"),
        (e.glance_tokens >= -1, "engine.glance_tokens must be -1 (device default), 0 (never) or more"),
        (1 <= c.max_tokens <= e.max_tokens_limit, "completion.max_tokens must be 1..engine.max_tokens_limit"),
        (0.0 <= c.temperature <= 5.0, "completion.temperature must be 0..5"),
        (0.0 < c.top_p <= 1.0, "completion.top_p must be in (0, 1]"),
        (c.first_line_ms >= 0, "completion.first_line_ms must not be negative"),
        (c.cut_ms >= 0, "completion.cut_ms must not be negative"),
        (0 <= d.tcp_port <= 65535, "daemon.tcp_port must be 0..65535"),
        (d.max_frame_bytes >= 1024, "daemon.max_frame_bytes must be at least 1024"),
        (d.trace_max_mb >= 1 and d.log_max_mb >= 1, "daemon.trace_max_mb and daemon.log_max_mb must be at least 1"),
        (d.start_timeout_s >= 1, "daemon.start_timeout_s must be at least 1"),
        (d.handshake_timeout_s >= 1, "daemon.handshake_timeout_s must be at least 1"),
        (e.cache_memory_mb >= 1, "engine.cache_memory_mb must be at least 1"),
        (0.0 <= e.draft_confidence <= 1.0, "engine.draft_confidence must be 0..1"),
        (0.0 <= e.min_probability < 1.0, "engine.min_probability must be 0 (never) up to, not including, 1"),
        (0.0 <= e.min_first_probability < 1.0,
         "engine.min_first_probability must be 0 (never) up to, not including, 1"),
    ]
    for ok, message in checks + _backend_checks(config.backend):
        if not ok:
            raise ConfigError(f"{path}: {message}")
    if problem := trigger_problem(config.trigger):
        raise ConfigError(f"{path}: trigger.{problem}")
    return config


def _backend_checks(b: BackendSettings) -> list[tuple[bool, str]]:
    checks = [(b.timeout_s > 0, "backend.timeout_s must be more than 0"),
              (1 <= b.max_in_flight <= 64, "backend.max_in_flight must be 1..64"),
              (b.family in ("auto", *TEMPLATES), f"backend.family must be auto or one of {', '.join(TEMPLATES)}"),
              (not b.api_key_env or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", b.api_key_env) is not None,
               "backend.api_key_env is the NAME of an environment variable holding the key (letters, digits, _), "
               "never the key itself")]
    if b.kind != "server":
        return checks
    try:
        Endpoint.parse(b.url)
        bad_url = ""
    except ValueError as error:
        bad_url = str(error)
    return checks + [
        (bool(b.url), 'backend.url is required with kind = "server" (e.g. "http://127.0.0.1:8080")'),
        (not b.url or not bad_url, f"backend.url: {bad_url}"),
        (bool(b.model), 'backend.model is required with kind = "server": the model the server serves'),
        (not b.model or b.family != "auto" or guess_family(b.model) is not None,
         f"backend.family: the FIM template cannot be told from the model name {b.model!r}; "
         f"set it to one of {', '.join(TEMPLATES)}"),
    ]
def trigger_problem(trigger: Trigger) -> str | None:
    """What is wrong with `trigger` beyond its types (the config's and an editor's alike), or None."""
    if trigger.delay_ms < 0 or trigger.delay_ms > MAX_DELAY_MS:
        return f"delay_ms must be 0..{MAX_DELAY_MS}, not {trigger.delay_ms}"
    if trigger.max_line_suffix < -1:
        return f"max_line_suffix must be -1 (never held back) or more, not {trigger.max_line_suffix}"
    if "" in trigger.languages:
        return 'languages: an empty language id; name one, or "*" for every other'
    return None


def render(config: Config) -> str:
    """The effective configuration as TOML (sections of scalars: strings, numbers, booleans, and
    tables of them inline)."""
    lines = []
    for section, values in msgspec.structs.asdict(config).items():
        lines.append(f"[{section}]")
        for key, value in msgspec.structs.asdict(values).items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):  # an inline table
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    return repr(value)
