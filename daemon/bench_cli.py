"""`specd bench`: every mode on the same cases and models in one process, then a table and JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from specd.daemon.config import load_config
from specd.daemon.protocol import Drafter

# The engine's modules (torch) are imported by the command, not by building the parser: every
# `specd` command builds it. The anchors' names here are for --help; cmd_bench checks the real ones.
ANCHOR_NAMES = "hf-greedy, hf-assisted, hf-lookup"


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark the drafters (and anchors) on FIM cases")
    p.add_argument("--cases", type=Path, required=True, help="JSON lines: prefix, suffix[, path, language, middle]")
    p.add_argument("--target", help="target model spec (default: the config's)")
    p.add_argument("--draft", help="draft model spec, or none (default: the config's)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--modes", default="none,lookup,draft,hybrid",
                   help=f"comma-separated: {', '.join(Drafter.__args__)}, none@1 (one-row passes)")
    p.add_argument("--anchors", action="store_true", help=f"add {ANCHOR_NAMES}")
    p.add_argument("--limit", type=int, help="only the first N cases")
    p.add_argument("--suffix-budgets", help="instead of speed: first-line quality per suffix budget, e.g. 0,32,64")
    p.add_argument("--json", type=Path, help="write the results here")
    p.set_defaults(run=cmd_bench)


def read_cases(path: Path, limit: int | None) -> list:
    from specd.decoding.bench import Case
    from specd.decoding.engine import RequestError

    cases = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                cases.append(msgspec.json.decode(line, type=Case))
            except msgspec.ValidationError as error:
                raise RequestError(f"{path}:{number}: {error}") from None
    if not cases:
        raise RequestError(f"{path} holds no cases")
    return cases[:limit] if limit else cases


def cmd_bench(args) -> int:
    from specd.daemon.runtime import build_engine
    from specd.decoding.bench import ANCHORS, bench, suffix_sweep
    from specd.decoding.engine import DRAFTERS, RequestError

    config = load_config(args.config)
    models = msgspec.structs.replace(config.models, target=args.target or config.models.target,
                                     draft=args.draft or config.models.draft)
    config = msgspec.structs.replace(config, models=models)
    cases = read_cases(args.cases, args.limit)
    modes = [m for m in args.modes.split(",") if m] + (list(ANCHORS) if args.anchors else [])
    known = set(DRAFTERS) | {"none@1"} | set(ANCHORS)
    if unknown := [m for m in modes if m not in known]:
        raise RequestError(f"unknown modes {unknown}; known: {', '.join(sorted(known))}")
    engine = build_engine(config)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.suffix_budgets:
        budgets = [int(b) for b in args.suffix_budgets.split(",")]
        result = suffix_sweep(engine, cases, budgets, args.max_tokens, log)
    else:
        result = bench(engine, cases, modes, args.max_tokens, log)
        print_table(result)
    result["settings"] = {"target": str(engine.target.spec), "draft": str(engine.draft.spec) if engine.draft else None,
                          "device": str(engine.target.device), "dtype": str(engine.target.dtype),
                          "max_tokens": args.max_tokens, "cases": str(args.cases), "width": engine.settings.width}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    if args.suffix_budgets:
        print(json.dumps(result["suffix_budgets"], indent=1))
    return 0


def print_table(result: dict) -> None:
    head = f"{'mode':12} {'tok/s':>7} {'x none':>7} {'accept':>7} {'identical':>9} {'prefill s':>9} {'decode s':>8} {'passes':>6}"
    print(head)
    print("-" * len(head))
    for mode, m in result["modes"].items():
        acceptance = f"{m['acceptance']:.2f}" if m["acceptance"] is not None else "-"
        speedup = f"{m['speedup_vs_none']:.2f}" if m.get("speedup_vs_none") else "-"
        identical = f"{m['identical_to_none']}/{m['cases']}" if "identical_to_none" in m else "-"
        print(f"{mode:12} {m['tokens_per_s'] or 0:7.2f} {speedup:>7} {acceptance:>7} {identical:>9} "
              f"{m['prefill_s']:9.1f} {m['decode_s']:8.1f} {m['target_forwards'] or '-':>6}")
