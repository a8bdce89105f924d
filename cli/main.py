"""`specd`: the one console script. Each subcommand is a small function; errors a user can cause
are printed as one clear line with exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from specd.cli import bench_cmds, complete_cmds, daemon_cmds, heads_cmds, lsp_cmds, models_cmds, trace_cmds
from specd.decoding.errors import UserError

# Commands that only talk to the daemon (start, stop, status, complete, trace) never import torch:
# the engine's modules load only in the commands that build an engine.
GROUPS = (models_cmds, complete_cmds, daemon_cmds, trace_cmds, bench_cmds, heads_cmds, lsp_cmds)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        return 130
    except UserError as error:
        print(f"specd: {error}", file=sys.stderr)
        return 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specd", description=__doc__.split("\n")[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    p.add_argument("--config", type=Path, help="config file (default: $SPECD_CONFIG or XDG)")
    sub = p.add_subparsers(required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    return p
