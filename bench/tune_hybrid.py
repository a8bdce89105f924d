"""Replay the hybrid drafter's choices on recorded tokens, to tune it without timing anything.

Greedy verification makes a proposal's fate a pure function of the output: a proposal made after
the first i output tokens gets as many tokens accepted as it shares with the output from i on.
So record, per case, the target's greedy tokens and, after every prefix of them, the draft model's
own proposal at full length with the probability it gave each token; then any policy (when to use
lookup, where to end the draft's proposal) is a replay that counts target passes and draft-model
tokens, for a whole grid of policies at once.

    .venv/bin/python bench/tune_hybrid.py --cases bench/quality.jsonl --json bench-out/tune.json

Lookup's proposals come from the engine's own `LookupDrafter`, the draft's from its own
`ModelDrafter` (`engine.model_drafter`: same window, same cache, same steps), and the policies are
the engine's own rules (decoding/policy.py: `DraftStop`, `hybrid_takes_lookup`) with other
parameters, so the replay counts what the engine would do. Cost is counted in target passes, a
draft-model token at `--draft-cost` of a pass (`specd bench` gives both times; README, "Tuning");
the few percent a wider verify pass costs more are left out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specd.daemon.bench_engine import read_cases  # noqa: E402
from specd.daemon.config import load_config  # noqa: E402
from specd.daemon.runtime import build_engine  # noqa: E402
from specd.decoding.drafter import DraftJob, Pacing  # noqa: E402
from specd.decoding.kvcache import KVCache  # noqa: E402
from specd.decoding.lookup import LookupDrafter  # noqa: E402
from specd.decoding.policy import DraftStop, hybrid_takes_lookup  # noqa: E402
from specd.decoding.request import CompletionRequest  # noqa: E402

NEVER = DraftStop(confidence=0.0)  # a proposal runs to full length; the replay applies the rule after


def record(engine, case, max_tokens: int) -> dict:
    """The case's greedy tokens, and after each prefix of them the draft's full-length proposal
    with the probability it gave each token."""
    request = CompletionRequest(prefix=case.prefix, suffix=case.suffix, document="tune", max_tokens=max_tokens,
                                drafter="lookup", stop_at_suffix=False, reuse=False)
    tokens = engine.complete(request).tokens   # lookup is exact: these are plain greedy's tokens
    prompt = engine.build_prompt(case.prefix, case.suffix)
    cache = KVCache(engine.draft.model, engine.settings.draft_capacity)
    proposer = engine.model_drafter(Pacing(judge=False), NEVER).begin(DraftJob(prompt, draft_cache=cache))
    chains = []
    for i in range(len(tokens)):
        proposal = proposer.propose(prompt.ids + tokens[:i], engine.settings.width - 1)
        chains.append((proposal.tokens, proposal.token_probs))
    return {"prompt": prompt, "tokens": tokens, "chains": chains}


def agree(proposal: list[int], tokens: list[int], i: int) -> int:
    n = 0
    while n < len(proposal) and i + n < len(tokens) and proposal[n] == tokens[i + n]:
        n += 1
    return n


def replay(rec: dict, width: int, ngram: int, min_match: int, stop: DraftStop, shrink: bool) -> tuple[int, int]:
    """(target passes, draft tokens) of one case under one policy: the engine's own rules
    (decoding/policy.py) with these parameters. `shrink`: a proposal is also at most one longer
    than what the last one got accepted, growing by two after a full acceptance."""
    lookup = LookupDrafter(ngram).begin(DraftJob(rec["prompt"]))
    tokens, i, passes, drafted, k = rec["tokens"], 0, 0, 0, 3 if shrink else width - 1
    while i < len(tokens):
        found = lookup.propose(rec["prompt"].ids + tokens[:i], width - 1)
        if hybrid_takes_lookup(found.match, min_match):
            accepted = agree(found.tokens, tokens, i)
        else:
            chain, probs = rec["chains"][i]
            proposed = min(k, stop.kept(probs))
            accepted = agree(chain[:proposed], tokens, i)
            drafted += proposed
            if shrink:
                k = min(width - 1, k + 2) if accepted == proposed else max(1, accepted + 1)
        passes += 1
        i += accepted + 1
    return passes, drafted


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=Path, required=True)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--draft-cost", type=float, default=0.19, help="a draft token, in target passes")
    p.add_argument("--top", type=int, default=20, help="policies to print, cheapest first")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    engine = build_engine(load_config(None))
    width, ngram = engine.settings.width, engine.settings.lookup_ngram
    records = []
    for n, case in enumerate(read_cases(args.cases, None)):
        records.append(record(engine, case, args.max_tokens))
        print(f"case {n + 1}: {len(records[-1]['tokens'])} tokens", file=sys.stderr, flush=True)
    total = sum(len(r["tokens"]) for r in records)
    rows = []
    grid = itertools.product((1, 2, 3, 4, 99), (False, True), (0.2, 0.3, 0.4, 0.5, 0.6, 0.7), (False, True))
    for min_match, cumulative, confidence, shrink in grid:
        passes = drafted = 0
        for rec in records:
            a, b = replay(rec, width, ngram, min_match, DraftStop(confidence, cumulative), shrink)
            passes, drafted = passes + a, drafted + b
        rows.append({"min_match": min_match, "cumulative": cumulative, "confidence": confidence, "shrink": shrink,
                     "passes": passes, "draft_tokens": drafted, "cost": round(passes + args.draft_cost * drafted, 1)})
    lookup_only = sum(replay(r, width, ngram, 0, NEVER, False)[0] for r in records)
    print(f"{len(records)} cases, {total} tokens: plain greedy {total} passes, lookup alone {lookup_only}")
    print("min_match  confidence          shrink  passes  draft tokens  cost (passes)")
    for row in sorted(rows, key=lambda r: r["cost"])[:args.top]:
        mm = "never" if row["min_match"] == 99 else row["min_match"]
        rule = f"{'product' if row['cumulative'] else 'token'} {row['confidence']}"
        print(f"{mm:>9}  {rule:18}  {row['shrink']!s:6}  {row['passes']:6}  {row['draft_tokens']:12}  "
              f"{row['cost']:.0f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"tokens": total, "lookup_only_passes": lookup_only, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
