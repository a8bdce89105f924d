"""`specd`: the one console script. Each subcommand is a small function; errors a user can cause
are printed as one clear line with exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from specd.daemon.config import ConfigError, load_config, render

# Commands that only talk to the daemon (start, stop, status, complete, trace) never import torch:
# the engine's modules load only in the commands that build an engine.


class UsageError(Exception):
    """A command line that cannot be served as given."""


def user_errors() -> tuple[type[Exception], ...]:
    """Errors a user can cause: said in one line, exit status 2. The engine's can only have been
    raised if their modules were imported, and importing them just to catch nothing costs torch."""
    from specd.daemon.client import DaemonError, NotRunning
    from specd.daemon.lifecycle import StartError
    from specd.daemon.paths import SetupError

    engine_errors = [("specd.decoding.engine", "RequestError"), ("specd.models.fetch", "ChunkError"),
                     ("specd.decoding.loaded", "ModelError"), ("specd.decoding.prompt", "PromptError")]
    return (ConfigError, UsageError, SetupError, StartError, NotRunning, DaemonError,
            *(getattr(sys.modules[module], name) for module, name in engine_errors if module in sys.modules))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if not isinstance(error, user_errors()):
            raise
        print(f"specd: {error}", file=sys.stderr)
        return 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specd", description=__doc__.split("\n")[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    p.add_argument("--config", type=Path, help="config file (default: $SPECD_CONFIG or XDG)")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    models = sub.add_parser("models", help="list the configured models; `pull` fetches the built-in pair")
    models.add_argument("action", nargs="?", choices=["list", "pull"], default="list")
    models.set_defaults(run=cmd_models)

    config = sub.add_parser("config", help="print the effective configuration")
    config.set_defaults(run=cmd_config)

    complete = sub.add_parser("complete", help="complete a file at a position")
    complete.add_argument("--file", required=True, help="the file, or - for standard input")
    complete.add_argument("--at", help="LINE:COL, 1-based (default: the end of the file)")
    complete.add_argument("--json", action="store_true", help="print text, outcome and stats as JSON")
    complete.add_argument("--max-tokens", type=int)
    complete.add_argument("--drafter", choices=["none", "lookup", "draft", "hybrid"])
    complete.add_argument("--single-line", action="store_true")
    complete.add_argument("--no-daemon", action="store_true", help="load the models in this process")
    complete.set_defaults(run=cmd_complete)

    from specd.daemon.bench_cli import add_bench_parser
    from specd.daemon.bench_daemon import add_bench_daemon_parser
    from specd.daemon.lifecycle import add_lifecycle_parsers
    from specd.daemon.trace_cli import add_trace_parser
    add_lifecycle_parsers(sub)
    add_trace_parser(sub)
    add_bench_parser(sub)
    add_bench_daemon_parser(sub)
    from specd.lsp.cli import add_parsers as add_lsp_parsers  # the editor's side: `lsp`, `replay`
    add_lsp_parsers(sub)
    return p


def cmd_models(args) -> int:
    from specd.models.info import info
    from specd.models.manifest import BUILTIN_BY_NAME
    from specd.models.resolve import pull_builtin
    from specd.models.specs import parse_spec

    config = load_config(args.config)
    cache = config.cache_dir()
    if args.action == "pull":
        for role in ("target", "draft"):
            spec = getattr(config.models, role)
            parsed = parse_spec(spec, role) if spec != "none" else None
            if parsed is not None and parsed.kind == "builtin":
                started = time.perf_counter()
                folder = pull_builtin(BUILTIN_BY_NAME[parsed.ref], cache, say=lambda line: print(line, file=sys.stderr))
                print(f"{role}: {parsed.ref} ready in {folder} ({time.perf_counter() - started:.1f} s)")
    print(f"{'role':7} {'converted':9} {'size':>9} {'params':>8} {'dtype':6} spec -> folder")
    for role in ("target", "draft"):
        spec = getattr(config.models, role)
        if spec == "none":
            print(f"{role:7} {'-':9} {'-':>9} {'-':>8} {'-':6} none")
            continue
        i = info(parse_spec(spec, role), cache)
        params = f"{i.parameters / 1e9:.2f}B" if i.parameters else "-"
        print(f"{role:7} {'yes' if i.converted else 'no':9} {i.bytes_on_disk / 2**30:>7.2f}GB "
              f"{params:>8} {i.dtype or '-':6} {i.spec} -> {i.folder}")
    return 0


def cmd_config(args) -> int:
    print(render(load_config(args.config)), end="")
    return 0


def read_cursor(file: str, at: str | None) -> tuple[str, str, str]:
    """(document uri, prefix, suffix) for the file cut at LINE:COL (1-based; default: its end)."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {file}: {error}") from None
    uri = "stdin" if file == "-" else Path(file).resolve().as_uri()
    if at is None:
        return uri, text, ""
    try:
        line, col = (int(x) for x in at.split(":"))
    except ValueError:
        raise UsageError(f"--at wants LINE:COL, not {at!r}") from None
    lines = text.splitlines(keepends=True)
    if not (1 <= line <= len(lines) + 1) or col < 1:
        raise UsageError(f"--at {at} is outside the file ({len(lines)} lines)")
    current = lines[line - 1] if line <= len(lines) else ""
    if col - 1 > len(current.rstrip("\n")):
        raise UsageError(f"--at {at}: line {line} has {len(current.rstrip(chr(10)))} characters")
    offset = sum(map(len, lines[: line - 1])) + col - 1
    return uri, text[:offset], text[offset:]


def cmd_complete(args) -> int:
    from specd.daemon.complete_cli import complete
    return complete(args, load_config(args.config))
