"""`specd lsp` (the language server editors start) and `specd replay` (an editor played against it)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import msgspec

from specd.bench.typist import add_arguments as add_typing_arguments
from specd.bench.typist import passages as typed_passages
from specd.cli.usage import UsageError
from specd.daemon.config import Trigger, load_config, trigger_problem
from specd.daemon.lifecycle import launch_daemon
from specd.daemon.paths import Paths
from specd.daemon.trace_report import model_time, requests_received
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
    add_typing_arguments(replay)
    replay.add_argument("--no-reuse", action="store_true", help="no prefix reuse, no typed-through answers")
    replay.add_argument("--no-cancel", action="store_true", help="never cancel: every request runs to the end")
    replay.add_argument("--no-prefetch", action="store_true",
                        help="no accept branches computed ahead (the typist never presses Tab)")
    replay.add_argument("--no-warm", action="store_true",
                        help="no document read ahead on opening or where the cursor rests")
    replay.add_argument("--delay-ms", type=int, metavar="MS",
                        help="the server's trigger.delay_ms for this run: each key's request waits MS, "
                             "and a newer key meanwhile means it is never sent (default: the config's)")
    replay.add_argument("--max-line-suffix", type=int, metavar="N",
                        help="the server's trigger.max_line_suffix for this run: no request where more than N "
                             "characters that are not whitespace follow the cursor on its line (-1: never held "
                             "back; default: the config's)")
    replay.add_argument("--baseline", action="store_true",
                        help="also run with --no-reuse --no-cancel, side by side in this run")
    replay.set_defaults(run=cmd_replay)

    stress = sub.add_parser("stress", help="N editors typing at once against one daemon of its own: "
                                           "requests lost, memory, latency")
    stress.add_argument("--clients", type=int, default=8, help="language servers, each typing its own document")
    stress.add_argument("--cps", type=float, default=20.0, help="keys a second, per client (default 20)")
    stress.add_argument("--seconds", type=float, default=60.0, help="how long they type (default 60)")
    stress.add_argument("--target", help="target model spec (default: the config's)")
    stress.add_argument("--draft", help="draft model spec, or none (default: the config's)")
    stress.add_argument("--json", type=Path, help="write the report here too")
    stress.set_defaults(run=cmd_stress)


def cmd_lsp(args) -> int:
    from specd.lsp.server import serve  # pygls: only this command loads it

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
    from specd.bench.replay import Replay, replay, specd_command
    from specd.bench.replay_report import report as figures
    from specd.bench.replay_report import write_records

    passages = typed_passages(args)
    trigger = {"delay_ms": args.delay_ms, "max_line_suffix": args.max_line_suffix}
    check_trigger(trigger)
    runs = {"replay": Replay(passages, args.cps, args.pause_ms, reuse=not args.no_reuse, cancel=not args.no_cancel,
                             prefetch=not args.no_prefetch, warm=not args.no_warm, read_ms=args.read_ms, **trigger)}
    if args.baseline:
        runs["no-reuse-no-cancel"] = Replay(passages, args.cps, args.pause_ms, reuse=False, cancel=False,
                                            prefetch=False, warm=False, read_ms=args.read_ms, **trigger)
    command = specd_command(args.config)
    trace = Paths.of(load_config(args.config)).trace
    report = {}
    for name, job in runs.items():
        outcomes = asyncio.run(replay(job, command))
        records = read_trace(trace)
        for outcome in outcomes:
            outcome.model_ms = model_time(records, outcome.uri, outcome.started, outcome.ended)
            outcome.asked = requests_received(records, outcome.uri, outcome.started, outcome.ended)
        report[name] = figures(outcomes)
        if args.records:   # the first run's (the one measured); --baseline's go beside it
            write_records(outcomes, args.records if name == "replay" else args.records.with_suffix(f".{name}.jsonl"))
        print(f"{name:20} {json.dumps(report[name])}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


def check_trigger(trigger: dict) -> None:
    """--delay-ms and --max-line-suffix by the config's rules, said as a usage error: the server
    would say the same only in a message no one reads here."""
    given = {name: value for name, value in trigger.items() if value is not None}
    if problem := trigger_problem(msgspec.convert(given, Trigger)):
        raise UsageError(f"--{problem.replace('_', '-')}")


def cmd_stress(args) -> int:
    from specd.bench.stress import Plan, stress, world

    if args.clients < 1 or args.cps <= 0 or args.seconds <= 0:
        raise UsageError("--clients, --cps and --seconds must be positive")
    config = load_config(args.config)
    models = msgspec.structs.replace(config.models, target=args.target or config.models.target,
                                     draft=args.draft or config.models.draft)
    with tempfile.TemporaryDirectory(prefix="specd-stress-") as root:
        report = asyncio.run(stress(Plan(args.clients, args.cps, args.seconds),
                                    world(msgspec.structs.replace(config, models=models), Path(root))))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 1 if report["crashed"] or report["lost"] else 0
