"""`specd bench` (the drafters on FIM cases, in this process) and `specd bench-daemon` (a running
daemon's figures, as a client sees them)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import msgspec

from specd.bench.daemon import DaemonBench, Document, run_bench_daemon
from specd.bench.engine import EngineBench, run_bench, run_profile
from specd.cli.usage import UsageError, read_document
from specd.daemon.config import load_config
from specd.decoding.registry import DRAFTERS

# The engine's modules (torch) are imported by the command, not by building the parser: every
# `specd` command builds it. The anchors' names here are for --help; run_bench checks the real ones.
ANCHOR_NAMES = "hf-greedy, hf-assisted, hf-lookup"


def add_parsers(sub) -> None:
    p = sub.add_parser("bench", help="benchmark the drafters (and anchors) on FIM cases")
    p.add_argument("--cases", type=Path,
                   help="JSON lines: prefix, suffix[, path, language, middle] (not with --profile)")
    p.add_argument("--target", help="target model spec (default: the config's)")
    p.add_argument("--draft", help="draft model spec, or none (default: the config's)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--modes", default=",".join(DRAFTERS),
                   help=f"comma-separated: {', '.join(DRAFTERS)}, none@1 (one-row passes)")
    p.add_argument("--anchors", action="store_true", help=f"add {ANCHOR_NAMES}")
    p.add_argument("--limit", type=int, help="only the first N cases")
    p.add_argument("--suffix-budgets", help="instead of speed: first-line quality per suffix budget, e.g. 0,32,64")
    p.add_argument("--quantize", help="instead of the modes: the first mode on each weight kind, side by side, "
                                      "e.g. none,int8,int4 (speed per pass, first lines against the first kind)")
    p.add_argument("--layerskip", action="store_true",
                   help="instead of the modes: layerskip with each candidate layer set against plain decoding; "
                        "the fastest exact set is kept for the daemon (engine.layerskip_layers = auto)")
    p.add_argument("--profile", action="store_true",
                   help="instead: ms per pass by part at widths 1, 4, 8, 16 after 1000 tokens, beside the floor "
                        "(the weights' bytes over the memory bandwidth); with --quantize, for each weight kind")
    p.add_argument("--json", type=Path, help="write the results here")
    p.set_defaults(run=cmd_bench)

    d = sub.add_parser("bench-daemon", help="against a running daemon: edit reuse, cancel latency, a burst "
                                            "with and without newest-wins")
    d.add_argument("--file", type=Path, default=Path(textwrap.__file__),
                   help="the document (default: the standard library's textwrap.py)")
    d.add_argument("--at", help="LINE:COL where typing starts (default: the start of the middle line)")
    d.add_argument("--burst", type=int, default=50, help="keystrokes in the burst (default 50)")
    d.add_argument("--interval-ms", type=float, default=30.0, help="between keystrokes (default 30)")
    d.add_argument("--max-tokens", type=int, default=16, help="per completion (default 16)")
    d.add_argument("--cancels", type=int, default=5, help="long requests to cancel (default 5)")
    d.add_argument("--json", type=Path, help="write the results here")
    d.set_defaults(run=cmd_bench_daemon)


def cmd_bench(args) -> int:
    if args.profile:
        return cmd_profile(args)
    if args.cases is None:
        raise UsageError("specd bench needs --cases FILE (or --profile)")
    config = load_config(args.config)
    models = msgspec.structs.replace(config.models, target=args.target or config.models.target,
                                     draft=args.draft or config.models.draft)
    config = msgspec.structs.replace(config, models=models)
    plan = EngineBench(args.cases, [m for m in args.modes.split(",") if m], args.anchors, args.max_tokens, args.limit,
                       [int(b) for b in args.suffix_budgets.split(",")] if args.suffix_budgets else None,
                       [k for k in args.quantize.split(",") if k] if args.quantize else None, args.layerskip)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    result = run_bench(config, plan, log)
    if plan.quantize:
        print(weights_table(result))
    elif plan.layerskip:
        print(layerskip_table(result))
    elif not plan.suffix_budgets:
        print(bench_table(result))
    write_json(args.json, result)
    if plan.suffix_budgets:
        print(json.dumps(result["suffix_budgets"], indent=1))
    return 0


def cmd_profile(args) -> int:
    from specd.models.cpu import describe

    config = load_config(args.config)
    models = msgspec.structs.replace(config.models, target=args.target or config.models.target,
                                     draft=args.draft or config.models.draft)
    config = msgspec.structs.replace(config, models=models)
    kinds = [k for k in (args.quantize or config.models.quantize).split(",") if k]
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    result = run_profile(config, kinds, log)
    print(f"{describe(result['cpu'])}; memory bandwidth {result['bandwidth_gbs']:.1f} GB/s")
    print(profile_table(result))
    write_json(args.json, result)
    return 0


def layerskip_table(result: dict) -> str:
    plain = result["none"]
    rows = [f"plain decoding: {plain['tokens_per_s']} tok/s; the target has {result['layers']} layers",
            f"{'layer set':40} {'kept':>4} {'acceptance':>10} {'tok/pass':>8} {'tok/s':>7} {'x none':>6} "
            "identical  layers"]
    for name, s in result["layerskip"].items():
        mark = " (kept)" if name == result["chosen"] else ""
        rows.append(f"{name + mark:40} {s['kept']:>4} {s['acceptance'] or 0:>10.3f} {s['tokens_per_pass']:>8.2f} "
                    f"{s['tokens_per_s'] or 0:>7.2f} {s['speedup_vs_none'] or 0:>6.2f} "
                    f"{s['identical_to_none']:>3}/{s['cases']:<5} {s['layers']}")
    return "\n".join(rows)


def profile_table(result: dict) -> str:
    from specd.decoding.profile import ORDER

    rows = []
    for name, m in result["models"].items():
        rows += ["", f"{name}: {m['weight_mb']:,.0f} MB of weights a pass, floor {m['floor_ms']:.1f} ms"]
        head = f"{'width':>5} {'ms':>7} {'x floor':>7} " + " ".join(f"{p:>13}" for p in ORDER)
        rows += [head, "-" * len(head)]
        for width, w in m["widths"].items():
            rows.append(f"{width:>5} {w['ms']:7.1f} {w['x_floor']:7.2f} "
                        + " ".join(f"{w['parts'][p]:13.1f}" for p in ORDER))
    return "\n".join(rows)


def weights_table(result: dict) -> str:
    head = (f"{'weights':8} {'ms/pass':>8} {'tok/s':>7} {'x first':>7} {'identical':>9} {'1st line same':>13} "
            f"{'1st line right':>14} {'prefill s':>9}")
    rows = [head, "-" * len(head)]
    for kind, m in result["weights"].items():
        rows.append(f"{kind:8} {m['ms_per_pass'] or 0:8.1f} {m['tokens_per_s'] or 0:7.2f} "
                    f"{m['speedup_vs_none'] or 0:7.2f} "
                    f"{m['identical_to_none']}/{m['cases']:<7} {m['first_line_same']}/{m['cases']:<11} "
                    f"{m['first_line_right']}/{m['cases']:<12} {m['prefill_s']:9.1f}")
    return "\n".join(rows)


def bench_table(result: dict) -> str:
    head = (f"{'mode':12} {'tok/s':>7} {'x none':>7} {'accept':>7} {'identical':>9} {'prefill s':>9} "
            f"{'decode s':>8} {'passes':>6}")
    rows = [head, "-" * len(head)]
    for mode, m in result["modes"].items():
        acceptance = f"{m['acceptance']:.2f}" if m["acceptance"] is not None else "-"
        speedup = f"{m['speedup_vs_none']:.2f}" if m.get("speedup_vs_none") else "-"
        identical = f"{m['identical_to_none']}/{m['cases']}" if "identical_to_none" in m else "-"
        rows.append(f"{mode:12} {m['tokens_per_s'] or 0:7.2f} {speedup:>7} {acceptance:>7} {identical:>9} "
                    f"{m['prefill_s']:9.1f} {m['decode_s']:8.1f} {m['target_forwards'] or '-':>6}")
    return "\n".join(rows)


def cmd_bench_daemon(args) -> int:
    uri, text = read_document(str(args.file))
    plan = DaemonBench(str(args.file), args.at, args.burst, args.interval_ms, args.max_tokens, args.cancels)
    result = asyncio.run(run_bench_daemon(load_config(args.config), Document(uri, text, args.at, args.burst), plan))
    print(daemon_report(result))
    write_json(args.json, result)
    return 0


def daemon_report(r: dict) -> str:
    e, a, c, b = r["edit"], r["accept"], r["cancel"], r["burst"]
    ms = lambda x: "-" if x is None else f"{x:.0f} ms"  # noqa: E731
    s = r["settings"]
    lines = [f"target {s['target']}, draft {s['draft']} on {s['device']} ({s['dtype']}); max_tokens {s['max_tokens']}",
             f"cold request        {ms(e['cold_ms']):>9}  ({e['cold_prompt_tokens']} prompt tokens, "
             f"{e['cold_prefilled_tokens']} prefilled)",
             f"one-character edit  {ms(e['edit_ms']):>9}  ({e['edit_reused_tokens']} reused, "
             f"{e['edit_prefilled_tokens']} prefilled; {e['speedup']:.1f}x the cold request's speed)",
             f"deleted back        {ms(e['deleted_back_ms']):>9}  "
             f"({'from the suggestion cache' if e['deleted_back_from_cache'] else 'computed'}"
             f"{', the first answer' if e['deleted_back_same'] else ', NOT the first answer'})",
             f"Tab, no prefetch    {ms(a['no_prefetch_ms']):>9}",
             f"Tab, prefetched     {ms(a['prefetched_ms']):>9}  "
             f"({'from the suggestion cache' if a['prefetched_from_cache'] else 'computed'})",
             f"Tab at once         {ms(a['tab_at_once_ms']):>9}  (waits for the prefetch in flight; "
             f"{'the same' if a['same_text'] else 'NOT the same'} next suggestion in all three)"]
    for phase in ("prefill", "decoding"):
        p = c[phase]
        lines.append(f"cancel in {phase:9} p50 {ms(p['p50_ms'])}, max {ms(p['max_ms'])} over {p['cancelled']} cancels"
                     + (f" ({p['finished_before_the_cancel']} finished first)"
                        if p["finished_before_the_cancel"] else ""))
    n, w = b["newest_wins"], b["all_served"]
    lines.append(f"\nburst of {s['burst']} keystrokes, {s['interval_ms']:.0f} ms apart   newest-wins   all served")
    for key, label in (("answered", "answered (done)"), ("cancelled", "cancelled")):
        lines.append(f"  {label:36}{n[key]:>12}{w[key]:>13}")
    for key, label in (("total_ms", "total time"), ("last_ms", "last keystroke to its completion"),
                       ("model_ms", "model time spent")):
        lines.append(f"  {label:36}{ms(n[key]):>12}{ms(w[key]):>13}")
    return "\n".join(lines)


def write_json(path: Path | None, result: dict) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
