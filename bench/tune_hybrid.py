"""Replay the hybrid drafter's choices on recorded tokens, to tune it without timing anything.

Greedy verification makes a proposal's fate a pure function of the output: a proposal made after
the first i output tokens gets as many tokens accepted as it shares with the output from i on.
So record, per case, the target's greedy tokens and, after every prefix of them, the draft model's
own proposal at full length with the probability it gave each token; then any policy (when to use
lookup, where to end the draft's proposal) is a replay that counts target passes and draft-model
tokens, and what they cost by the machine's curve, for a whole grid of policies at once.

    .venv/bin/python bench/tune_hybrid.py --cases bench/quality.jsonl --json bench-out/tune.json

Lookup's proposals come from the engine's own `LookupDrafter` (its lengths chosen, and its
acceptance learned, as the engine does), the draft's from its own `ModelDrafter`
(`engine.model_drafter`: same window, same cache, same steps), and the policies are the engine's
own rules (decoding/policy.py: `DraftStop`, `hybrid_takes_lookup`) with other parameters, so the
replay counts what the engine would do. Cost is the engine's curve (`engine.costs`): each target
pass at the width it verified, each draft-model token at a one-row draft step.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from specd.bench.engine import read_cases
from specd.daemon.config import load_config
from specd.daemon.runtime import build_engine
from specd.decoding.drafter import Acceptance, DraftJob, Pacing
from specd.decoding.kvcache import KVCache
from specd.decoding.lookup import LookupDrafter
from specd.decoding.policy import DraftStop, FullLength, PassCosts, hybrid_takes_lookup
from specd.decoding.request import CompletionRequest

NEVER = 10_000  # a min_match no lookup reaches: the draft model alone


def record(engine, case, max_tokens: int) -> dict:
    """The case's greedy tokens, and after each prefix of them the draft's full-length proposal
    with the probability it gave each token."""
    request = CompletionRequest(prefix=case.prefix, suffix=case.suffix, document="tune", max_tokens=max_tokens,
                                drafter="lookup", stop_at_suffix=False, reuse=False)
    tokens = engine.complete(request).tokens   # lookup is exact: these are plain greedy's tokens
    prompt = engine.build_prompt(case.prefix, case.suffix)
    cache = KVCache(engine.draft.model, engine.settings.draft_capacity)
    proposer = engine.model_drafter(Pacing(engine.costs, judge=False), FullLength()).begin(
        DraftJob(prompt, draft_cache=cache))
    chains = []
    for i in range(len(tokens)):
        proposal = proposer.propose(prompt.ids + tokens[:i], engine.width - 1)
        chains.append((proposal.tokens, proposal.token_probs))
    return {"prompt": prompt, "tokens": tokens, "chains": chains}


def agree(proposal: list[int], tokens: list[int], i: int) -> int:
    n = 0
    while n < len(proposal) and i + n < len(tokens) and proposal[n] == tokens[i + n]:
        n += 1
    return n


def replay(rec: dict, costs: PassCosts, ngram: int, min_match: int, stop: DraftStop) -> tuple[int, int, float]:
    """(target passes, draft tokens, ms by the curve) of one case under one policy: the engine's
    own rules (decoding/policy.py) with these parameters."""
    lookup = LookupDrafter(costs, Acceptance(costs.longest), ngram).begin(DraftJob(rec["prompt"]))
    tokens, i, passes, drafted, ms = rec["tokens"], 0, 0, 0, 0.0
    while i < len(tokens):
        found = lookup.propose(rec["prompt"].ids + tokens[:i], costs.longest)
        if hybrid_takes_lookup(found.match, min_match):
            verified, accepted = len(found.tokens), agree(found.tokens, tokens, i)
            lookup.observe(found, accepted, 0.0, 0.0)
        else:
            chain, probs = rec["chains"][i]
            drafts, verified = stop.kept(probs[: costs.longest])
            accepted = agree(chain[:verified], tokens, i)
            drafted, ms = drafted + drafts, ms + drafts * costs.token_ms
        passes, ms = passes + 1, ms + costs.verify_ms[verified]
        i += accepted + 1
    return passes, drafted, ms


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=Path, required=True)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--top", type=int, default=20, help="policies to print, cheapest first")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    engine = build_engine(load_config(None), drafters=("hybrid",))
    costs, ngram = engine.costs, engine.settings.lookup_ngram
    records = []
    for n, case in enumerate(read_cases(args.cases, None)):
        records.append(record(engine, case, args.max_tokens))
        print(f"case {n + 1}: {len(records[-1]['tokens'])} tokens", file=sys.stderr, flush=True)
    total = sum(len(r["tokens"]) for r in records)
    rows = []
    grid = itertools.product((1, 2, 3, 4, NEVER), (False, True), (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7))
    for min_match, cumulative, confidence in grid:
        passes = drafted = 0
        ms = 0.0
        for rec in records:
            a, b, c = replay(rec, costs, ngram, min_match, DraftStop(costs, confidence, cumulative))
            passes, drafted, ms = passes + a, drafted + b, ms + c
        rows.append({"min_match": min_match, "cumulative": cumulative, "confidence": confidence,
                     "passes": passes, "draft_tokens": drafted, "ms": round(ms)})
    lookup_only = sum(replay(r, costs, ngram, 0, DraftStop(costs))[2] for r in records)
    print(f"{len(records)} cases, {total} tokens: plain greedy {total * costs.verify_ms[0]:.0f} ms, "
          f"lookup alone {lookup_only:.0f} ms (by the curve: {engine.curve.summary()})")
    print("min_match  confidence floor  passes  draft tokens  ms (curve)")
    for row in sorted(rows, key=lambda r: r["ms"])[:args.top]:
        mm = "never" if row["min_match"] == NEVER else row["min_match"]
        rule = f"{'product' if row['cumulative'] else 'token'} {row['confidence']}"
        print(f"{mm:>9}  {rule:16}  {row['passes']:6}  {row['draft_tokens']:12}  {row['ms']:10}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"tokens": total, "lookup_only_ms": round(lookup_only), "rows": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
