"""`specd lsp` (the language server editors start) and `specd replay` (an editor played against it)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from specd.cli.usage import UsageError, read_document
from specd.daemon.config import load_config
from specd.daemon.lifecycle import launch_daemon
from specd.daemon.paths import Paths
from specd.daemon.trace_report import model_time
from specd.daemon.tracing import read_trace

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parsers(sub) -> None:
    lsp = sub.add_parser("lsp", help="run the language server on stdio (what editors start)")
    lsp.add_argument("--tcp", metavar="HOST:PORT", help="listen on loopback TCP instead (for debugging)")
    # What language clients add by convention (vscode-languageclient: `--stdio`); stdio is the default.
    lsp.add_argument("--stdio", action="store_true", help=argparse.SUPPRESS)
    lsp.add_argument("--clientProcessId", help=argparse.SUPPRESS)
    lsp.set_defaults(run=cmd_lsp)

    replay = sub.add_parser("replay", help="play an editor typing into FILE (or a folder) and measure the latency felt")
    replay.add_argument("file", type=Path, help="a source file, or with --files a folder of them")
    replay.add_argument("--at", help="LINE:COL, 1-based: where typing starts in FILE")
    replay.add_argument("--files", type=int, metavar="N",
                        help="type at N places across FILE (a folder or one file), chosen by --seed, languages in turn")
    replay.add_argument("--seed", type=int, default=0, help="which places --files picks (default 0)")
    replay.add_argument("--chars", type=int, default=40, help="how many of the real next characters to type (default 40)")
    replay.add_argument("--cps", type=float, default=10.0, help="keys per second (default 10)")
    replay.add_argument("--pause-ms", type=float, default=0.0,
                        help="pause this long after each word, as people do (default 0: no pauses)")
    replay.add_argument("--no-reuse", action="store_true", help="no prefix reuse, no typed-through answers")
    replay.add_argument("--no-cancel", action="store_true", help="never cancel: every request runs to the end")
    replay.add_argument("--baseline", action="store_true",
                        help="also run with --no-reuse --no-cancel, side by side in this run")
    replay.add_argument("--json", type=Path, help="write the report here")
    replay.set_defaults(run=cmd_replay)


def cmd_lsp(args) -> int:
    from specd.lsp.server import serve   # pygls: only this command loads it

    config = load_config(args.config)
    tcp = None
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if host not in LOOPBACK or not port.isdigit():
            raise UsageError(f"--tcp wants HOST:PORT on loopback ({', '.join(LOOPBACK)}), not {args.tcp!r}")
        tcp = (host, int(port))
    serve(config, launch_daemon, tcp)
    return 0


def cmd_replay(args) -> int:
    from specd.lsp.replay import Replay, replay, specd_command
    from specd.lsp.replay_report import report as figures

    if args.cps <= 0 or args.pause_ms < 0:
        raise UsageError("--cps must be positive and --pause-ms not negative")
    passages = replay_passages(args)
    runs = {"replay": Replay(passages, args.cps, args.pause_ms, reuse=not args.no_reuse, cancel=not args.no_cancel)}
    if args.baseline:
        runs["no-reuse-no-cancel"] = Replay(passages, args.cps, args.pause_ms, reuse=False, cancel=False)
    command = specd_command(args.config)
    trace = Paths.of(load_config(args.config)).trace
    report = {}
    for name, job in runs.items():
        outcomes = asyncio.run(replay(job, command))
        records = read_trace(trace)
        for outcome in outcomes:
            outcome.model_ms = model_time(records, outcome.uri, outcome.started, outcome.ended)
        report[name] = figures(outcomes)
        print(f"{name:20} {json.dumps(report[name])}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


def replay_passages(args) -> tuple:
    """What `specd replay` types: the passage at --at in FILE, or --files N passages across it."""
    from specd.lsp.typist import Passage, sample

    if args.chars < 1:
        raise UsageError(f"--chars must be at least 1, not {args.chars}")
    if args.files is not None:
        if args.at is not None:
            raise UsageError("--at names one place; --files picks N of them: give one or the other")
        if args.files < 1:
            raise UsageError(f"--files must be at least 1, not {args.files}")
        if not args.file.exists():
            raise UsageError(f"{args.file} does not exist")
        return tuple(sample(args.file, args.files, args.chars, args.seed))
    if args.at is None:
        raise UsageError(f"{args.file}: say where to type, --at LINE:COL (or --files N for places chosen across it)")
    _, text = read_document(str(args.file))
    return (Passage.of(args.file, text, args.at, args.chars),)
