"""Benchmarks on FIM cases: every mode on the same loaded models, side by side in one run.

A mode is a drafter name run through the engine (`none` is plain greedy through the same loop,
the baseline), `none@1` (plain greedy with one-row passes: what exactness costs, and how often it
would have differed), or an anchor: Hugging Face `generate` plain (`hf-greedy`), with the draft
as `assistant_model` (`hf-assisted`), and with `prompt_lookup_num_tokens=10` (`hf-lookup`).
Every case runs with a cold cache in every mode, so prefill times compare. Prefill is both
models reading the prompt; decode is the rest, so tokens/s is new tokens over decode time.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from specd.decoding.engine import Engine
from specd.decoding.request import CompletionRequest

ANCHORS = ("hf-greedy", "hf-assisted", "hf-lookup")


@dataclass(frozen=True)
class Case:
    prefix: str
    suffix: str = ""
    path: str = ""
    language: str = ""
    middle: str = ""  # the real text at the cursor, where known (for quality)


@dataclass
class Run:
    """One case in one mode."""
    tokens: list[int]
    text: str
    prefill_s: float
    decode_s: float
    target_forwards: int
    proposed: int
    accepted: int


def fewer_heads(mode: str) -> int:
    """K of a `heads@K` mode (the first K of the kept heads); 0 for any other mode."""
    name, _, count = mode.partition("@")
    return int(count) if name == "heads" and count.isdigit() and int(count) >= 1 else 0


def run_engine(engine: Engine, case: Case, mode: str, max_tokens: int, tag: str,
               single_line: bool = False) -> Run:
    request = CompletionRequest(prefix=case.prefix, suffix=case.suffix, document=f"bench:{tag}",
                                max_tokens=max_tokens, drafter=mode, single_line=single_line,
                                stop_at_suffix=False)
    result = engine.complete(request)
    engine.forget(request.document)  # the next mode starts cold too
    s = result.stats
    # Prefill is both models reading the prompt: the draft reads its window lazily, on its first
    # proposal, so that lookup-served requests never pay for it, but it is prompt work all the same
    # (and hf-assisted's draft reads the prompt before its target's first forward, in its prefill).
    prefill_ms = s.prefill_ms + s.draft_prefill_ms
    decode_ms = s.total_ms - s.tokenize_ms - prefill_ms
    return Run(result.tokens, result.text, prefill_ms / 1e3, decode_ms / 1e3, s.target_forwards,
               sum(s.proposed.values()), sum(s.accepted.values()))


def run_anchor(engine: Engine, case: Case, mode: str, max_tokens: int) -> Run:
    """Hugging Face `generate` on the same prompt ids. Its prefill is its first forward of the
    target (the whole prompt), timed by a hook; decode is from there to the last token, as for the
    engine. Two things fall in the anchors' favour: their first token comes out of their prefill,
    the engine's out of its first decoding pass; and hf-assisted's draft reads the prompt before
    the target's first forward, so it lands in prefill, where the engine counts it in decode."""
    ids = engine.build_prompt(case.prefix, case.suffix).ids
    model, device = engine.target.model, engine.target.device
    kwargs = {}
    if mode == "hf-assisted":
        if engine.draft is None:
            raise ValueError("hf-assisted needs a draft model")
        kwargs["assistant_model"] = engine.draft.model
    elif mode == "hf-lookup":
        kwargs["prompt_lookup_num_tokens"] = 10
    prefilled: list[float] = []
    hook = model.register_forward_hook(lambda *_: prefilled.append(time.perf_counter()) if not prefilled else None)
    stops = sorted(engine.stop_ids)
    started = time.perf_counter()
    try:
        with torch.inference_mode(), stock_attention(model, kwargs.get("assistant_model")):
            out = model.generate(torch.tensor([ids], device=device),
                                 attention_mask=torch.ones(1, len(ids), device=device, dtype=torch.long),
                                 max_new_tokens=max_tokens, do_sample=False, eos_token_id=stops,
                                 pad_token_id=engine.pad_id, **kwargs)
    finally:
        hook.remove()
    end = time.perf_counter()
    tokens = out[0, len(ids):].tolist()
    cut = next((i for i, t in enumerate(tokens) if t in engine.stop_ids), len(tokens))
    tokens = tokens[:cut]
    return Run(tokens, engine.target.tokenizer.decode(tokens), prefilled[0] - started, end - prefilled[0], 0, 0, 0)


@contextmanager
def stock_attention(*models: torch.nn.Module | None):
    """The anchors are Hugging Face as shipped: its own SDPA attention, not the engine's
    (decoding/attention.py), for as long as they run."""
    models = [m for m in models if m is not None]
    before = [m.config._attn_implementation for m in models]
    try:
        for m in models:
            m.set_attn_implementation("sdpa")
        yield
    finally:
        for m, name in zip(models, before):
            m.set_attn_implementation(name)


def summarize(runs: list[Run], baseline: list[Run] | None) -> dict:
    new = sum(len(r.tokens) for r in runs)
    # tokens after the first: the first comes from the prompt's last row, in every mode
    decode_s = sum(r.decode_s for r in runs)
    proposed, accepted = sum(r.proposed for r in runs), sum(r.accepted for r in runs)
    out = {
        "cases": len(runs), "new_tokens": new,
        "prefill_s": round(sum(r.prefill_s for r in runs), 3), "decode_s": round(decode_s, 3),
        "tokens_per_s": round(new / decode_s, 3) if decode_s else None,
        "target_forwards": sum(r.target_forwards for r in runs),
        "proposed": proposed, "accepted": accepted,
        "acceptance": round(accepted / proposed, 3) if proposed else None,
    }
    if baseline is not None:
        base_s = sum(r.decode_s for r in baseline)
        out["speedup_vs_none"] = round(base_s / decode_s, 3) if decode_s else None
        out["identical_to_none"] = sum(r.tokens == b.tokens for r, b in zip(runs, baseline))
    return out


def per_case(runs: list[Run], baseline: list[Run] | None) -> list[dict]:
    return [{**summarize([r], [b] if baseline else None), "text": r.text}
            for r, b in zip(runs, baseline or runs)]


def bench(engine: Engine, cases: list[Case], modes: list[str], max_tokens: int,
          progress=print) -> dict:
    """Run every case in every mode; `none` first when asked for, as the baseline. Modes take turns
    case by case, so that a shared machine's slow minutes fall on every mode alike rather than on
    whichever ran then (on a shared machine the same pass varies over minutes)."""
    narrow, fewer = None, {}
    order = sorted(modes, key=lambda m: m != "none")
    runs: dict[str, list[Run]] = {mode: [] for mode in order}
    for i, case in enumerate(cases):
        for mode in order:
            if mode in ANCHORS:
                run = run_anchor(engine, case, mode, max_tokens)
            elif mode == "none@1":
                narrow = narrow or engine.with_settings(width=1)
                run = run_engine(narrow, case, "none", max_tokens, f"{mode}:{i}")
            elif fewer_heads(mode):
                if mode not in fewer:
                    fewer[mode] = engine.with_heads(engine.heads.first(fewer_heads(mode)))
                run = run_engine(fewer[mode], case, "heads", max_tokens, f"{mode}:{i}")
            else:
                run = run_engine(engine, case, mode, max_tokens, f"{mode}:{i}")
            runs[mode].append(run)
            progress(f"{mode:12} case {i + 1}/{len(cases)}: {len(run.tokens)} tokens, "
                     f"prefill {run.prefill_s:.2f} s, decode {run.decode_s:.2f} s")
    baseline = runs.get("none")
    return {"modes": {mode: {**summarize(r, baseline), "per_case": per_case(r, baseline)}
                      for mode, r in runs.items()}}


def weights_bench(engines: dict[str, Engine], cases: list[Case], mode: str, max_tokens: int,
                  progress=print) -> dict:
    """The same mode on the same cases, one engine per weight kind (none, int8, int4), taking
    turns case by case; each kind against the first: speed per pass, and how often its first line
    (and its whole completion) is the first kind's."""
    runs: dict[str, list[Run]] = {kind: [] for kind in engines}
    for i, case in enumerate(cases):
        for kind, engine in engines.items():
            run = run_engine(engine, case, mode, max_tokens, f"{kind}:{i}")
            runs[kind].append(run)
            progress(f"{kind:6} case {i + 1}/{len(cases)}: {len(run.tokens)} tokens, prefill {run.prefill_s:.2f} s, "
                     f"decode {run.decode_s:.2f} s")
    baseline = runs[next(iter(engines))]
    out = {}
    for kind, r in runs.items():
        summary = summarize(r, baseline)
        passes = summary["target_forwards"]
        summary["ms_per_pass"] = round(summary["decode_s"] * 1e3 / passes, 1) if passes else None
        summary["first_line_same"] = sum(first_line(a.text) == first_line(b.text) for a, b in zip(r, baseline))
        summary["first_line_right"] = sum(first_line(a.text) == first_line(c.middle) != "" for a, c in zip(r, cases))
        summary["per_case"] = per_case(r, baseline)
        out[kind] = summary
    return {"weights": out, "mode": mode}


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def suffix_sweep(engine: Engine, cases: list[Case], budgets: list[int], max_tokens: int,
                 progress=print) -> dict:
    """First-line quality per suffix budget (plain greedy, single line), and what a keystroke
    costs at each: every budget runs on the case's cached prefix, so its prefill time is the
    recomputation of the suffix that a keystroke at the cursor forces."""
    trial = engine.with_settings(suffix_tokens=max(budgets))
    right = {b: 0 for b in budgets}
    prefill_s = {b: 0.0 for b in budgets}
    for i, case in enumerate(cases):
        document = f"suffix:{i}"
        # the state before the last keystroke: the measured call is then that keystroke
        trial.complete(CompletionRequest(prefix=case.prefix[:-1], suffix=case.suffix, document=document,
                                         max_tokens=1, drafter="none", suffix_tokens=max(budgets)))
        for budget in budgets:
            result = trial.complete(CompletionRequest(
                prefix=case.prefix, suffix=case.suffix, document=document, max_tokens=max_tokens,
                drafter="none", single_line=True, suffix_tokens=budget))
            right[budget] += first_line(result.text) == first_line(case.middle) != ""
            prefill_s[budget] += result.stats.prefill_ms / 1e3
        trial.forget(document)
        progress(f"case {i + 1}/{len(cases)}: first lines right so far " +
                 ", ".join(f"{b}:{right[b]}" for b in budgets))
    return {"suffix_budgets": {str(b): {
        "cases": len(cases), "first_line_right": right[b], "first_line_rate": round(right[b] / len(cases), 3),
        "keystroke_prefill_s": round(prefill_s[b] / len(cases), 3)} for b in budgets}}


def layerskip_search(engine: Engine, cases: list[Case], max_tokens: int, progress=print) -> dict:
    """`layerskip` with each candidate layer set (decoding/layerskip.py) against plain decoding,
    taking turns case by case, drafting on every pass (no pacing: each set's acceptance is
    measured whole). The fastest set that gave plain decoding's tokens on every case is chosen."""
    from specd.decoding import layerskip

    n = engine.target.model.config.num_hidden_layers
    unpaced = engine.with_settings(pace_drafts=False)
    engines = {name: unpaced.with_layers(kept) for name, kept in layerskip.candidates(n).items()}
    plain: list[Run] = []
    runs: dict[str, list[Run]] = {name: [] for name in engines}
    for i, case in enumerate(cases):
        plain.append(run_engine(engine, case, "none", max_tokens, f"none:{i}"))
        for name, candidate in engines.items():
            run = run_engine(candidate, case, "layerskip", max_tokens, f"layerskip:{i}")
            runs[name].append(run)
            progress(f"{name:40} case {i + 1}/{len(cases)}: accepted {run.accepted} of {run.proposed}, "
                     f"decode {run.decode_s:.2f} s")
    sets = {name: {**summarize(r, plain), "layers": layerskip.spell(engines[name].layers),
                   "kept": len(engines[name].layers),
                   "tokens_per_pass": round(sum(len(x.tokens) for x in r)
                                            / max(1, sum(x.target_forwards for x in r)), 2)}
            for name, r in runs.items()}
    exact = [name for name, s in sets.items() if s["identical_to_none"] == len(cases)]
    chosen = max(exact, key=lambda name: sets[name]["tokens_per_s"] or 0.0) if exact else None
    return {"layerskip": sets, "none": summarize(plain, None), "chosen": chosen, "layers": n}
