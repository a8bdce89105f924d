"""The LSP side of the `specd` command: `specd lsp` and `specd replay`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    lsp = sub.add_parser("lsp", help="run the language server on stdio (what editors start)")
    lsp.add_argument("--tcp", metavar="HOST:PORT", help="listen on loopback TCP instead (for debugging)")
    # What language clients add by convention (vscode-languageclient: `--stdio`); stdio is the default.
    lsp.add_argument("--stdio", action="store_true", help=argparse.SUPPRESS)
    lsp.add_argument("--clientProcessId", help=argparse.SUPPRESS)
    lsp.set_defaults(run=cmd_lsp)

    replay = sub.add_parser("replay", help="play an editor typing into FILE and measure the latency felt")
    replay.add_argument("file", type=Path)
    replay.add_argument("--at", required=True, help="LINE:COL, 1-based: where typing starts")
    replay.add_argument("--chars", type=int, required=True, help="how many of the real next characters to type")
    replay.add_argument("--cps", type=float, default=10.0, help="keys per second (default 10)")
    replay.add_argument("--no-reuse", action="store_true", help="no prefix reuse, no typed-through answers")
    replay.add_argument("--no-cancel", action="store_true", help="never cancel: every request runs to the end")
    replay.add_argument("--baseline", action="store_true",
                        help="also run with --no-reuse --no-cancel, side by side in this run")
    replay.add_argument("--json", type=Path, help="write the report here")
    replay.set_defaults(run=cmd_replay)


def cmd_lsp(args) -> int:
    from specd.daemon.config import load_config
    from specd.lsp.server import serve

    serve(load_config(args.config), args.tcp)
    return 0


def cmd_replay(args) -> int:
    from specd.daemon.config import load_config
    from specd.daemon.paths import Paths
    from specd.decoding.engine import RequestError
    from specd.lsp.replay import Replay, replay, specd_command

    try:
        line, column = (int(x) for x in args.at.split(":"))
    except ValueError:
        raise RequestError(f"--at wants LINE:COL, not {args.at!r}") from None
    runs = {"replay": Replay(args.file, line, column, args.chars, args.cps, not args.no_reuse, not args.no_cancel)}
    if args.baseline:
        runs["no-reuse-no-cancel"] = Replay(args.file, line, column, args.chars, args.cps, False, False)
    command = specd_command(args.config)
    trace = Paths.of(load_config(args.config)).trace
    report = {}
    for name, job in runs.items():
        try:
            outcome = asyncio.run(replay(job, command, trace))
        except ValueError as error:  # the cut does not fit the file
            raise RequestError(f"{args.file}: {error}") from None
        report[name] = outcome.report()
        print(f"{name:20} {json.dumps(report[name])}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0
