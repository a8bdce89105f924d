"""`specd complete`: one completion of a file at a position, through the daemon or in this process."""

from __future__ import annotations

import asyncio
import json
import sys

import msgspec

from specd.cli.usage import UsageError, read_document
from specd.daemon import protocol
from specd.daemon.client import new_request_id
from specd.daemon.complete import in_process, through_daemon
from specd.daemon.config import load_config
from specd.decoding.registry import DRAFTERS
from specd.lsp.cursor import cut_at


def add_parsers(sub) -> None:
    complete = sub.add_parser("complete", help="complete a file at a position")
    complete.add_argument("--file", required=True, help="the file, or - for standard input")
    complete.add_argument("--at", help="LINE:COL, 1-based (default: the end of the file)")
    complete.add_argument("--json", action="store_true", help="print text, outcome and stats as JSON")
    complete.add_argument("--max-tokens", type=int)
    complete.add_argument("--drafter", choices=DRAFTERS)
    complete.add_argument("--single-line", action="store_true")
    complete.add_argument("--no-daemon", action="store_true", help="load the models in this process")
    complete.add_argument("--quantize", choices=("auto", "none", "int8", "int4", "gguf"),
                          help="with --no-daemon: the target's weights (default: the config's models.quantize)")
    complete.set_defaults(run=cmd_complete)


def cmd_complete(args) -> int:
    config = load_config(args.config)
    if args.quantize:
        if not args.no_daemon:
            raise UsageError("--quantize applies to --no-daemon; a running daemon has its weights (models.quantize)")
        config = msgspec.structs.replace(config, models=msgspec.structs.replace(config.models, quantize=args.quantize))
    uri, text = read_document(args.file)
    prefix, suffix = cut_at(text, args.at)
    # cut_ms 0: no one is typing here, so a line is never cut at a word for time (editors' are)
    message = protocol.Complete(id=new_request_id(), document=uri, prefix=prefix, suffix=suffix,
                                max_tokens=args.max_tokens, single_line=args.single_line, drafter=args.drafter,
                                cut_ms=0)
    report = in_process(config, message) if args.no_daemon else asyncio.run(through_daemon(config, message))
    show(report, args.json)
    return 0


def show(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=1))
        return
    print(report["text"])
    s = report
    where = f"; {s['round_trip_ms']:.0f} ms through the daemon" if "round_trip_ms" in s else ""
    print(f"--- {s['outcome']} ({s['stop_reason']}): {s['new_tokens']} tokens in {s['total_ms']:.0f} ms "
          f"(prefill {s['prefill_ms']:.0f} ms: {s['reused_tokens']} reused, {s['prefilled_tokens']} new; "
          f"draft {s['draft_ms']:.0f} ms, verify {s['verify_ms']:.0f} ms{where})", file=sys.stderr)
