"""The GPU check's timings and probe (bench/gpu_check.sh runs it, then the exactness tests).

Random weights on the real shapes of Qwen2.5-Coder 0.5B, 1.5B and 7B (no weight files: the
configs' numbers are below), through the engine's own passes (decoding/forward.py) on its static
cache: ms per 1-, 8-, 16- and 32-row target pass, per prefill chunk and per draft step, eager
against captured (decoding/graphs.py); one simulated keystroke; and the width probe's verdict
(decoding/widths.py, every width run twice) on the passes that are used. On the CPU (--device
cpu) the models keep their real widths but only 2 layers and a 32768-token vocabulary, and the
captured column is empty. Runs with the torch and transformers of the machine it is on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from dataclasses import dataclass

import torch

from specd.decoding import graph_setup, graphs
from specd.decoding.determinism import make_deterministic
from specd.decoding.forward import draft_step, prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.widths import Nondeterministic, smallest_equivalent_width

# From the models' config.json (Qwen/Qwen2.5-Coder-{0.5B,1.5B,7B}): the 0.5B and 1.5B as the
# built-in pair's converted configs on disk say; the 7B as its published config says (written here
# from memory of it, since no 7B file is on disk: hidden 3584, 18944, 28 layers, 28/4 heads).
CONFIGS = {
    "0.5B": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "1.5B": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "7B": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
}
COMMON = dict(max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu",
              bos_token_id=0, eos_token_id=0)
CPU_SIZES = dict(num_hidden_layers=2, vocab_size=32768)

CHUNK = 128            # the engine's prefill chunk
EDIT = 23              # a keystroke's edit: tokens of the prompt that changed
NEW, ACCEPTED = 12, 2  # new tokens per keystroke; drafts accepted per verify pass (+1 own token)


@dataclass(frozen=True)
class Sizes:
    capacity: int          # the target's static cache (the engine's default is about 1400)
    cached: int            # tokens already in it: a warm document
    draft_capacity: int
    draft_cached: int
    widths: tuple[int, ...]  # target passes timed
    probe_up_to: tuple[int, ...]


GPU = Sizes(1536, 1024, 1024, 512, (1, 8, 16, 32), (8, 32))
CPU = Sizes(512, 384, 512, 256, (1, 8, 16), (8,))  # a 2-core CPU shared with others


@dataclass
class Row:
    model: str
    what: str
    eager_ms: float
    captured_ms: float | None

    def line(self) -> str:
        captured = "-" if self.captured_ms is None else f"{self.captured_ms:8.2f}"
        ratio = "-" if self.captured_ms is None else f"{self.captured_ms / self.eager_ms:.2f}"
        return f"| {self.model:5} | {self.what:56} | {self.eager_ms:8.2f} | {captured:>8} | {ratio:>5} |"


def build(name: str, device: torch.device, small: bool) -> torch.nn.Module:
    """The model in bf16 on `device`, weights N(0, 0.02) and norms 1 (transformers' own init
    skipped where it can be: on a CPU it costs more than the check)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        no_init_weights = contextlib.nullcontext
    config = Qwen2Config(**{**COMMON, **CONFIGS[name], **(CPU_SIZES if small else {})})
    config._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device), no_init_weights():
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    g = torch.Generator(device).manual_seed(len(name))
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.fill_(1.0) if pname.endswith("norm.weight") else p.normal_(0.0, 0.02, generator=g)
    model.eval()
    if device.type == "cpu":
        from specd.decoding import attention

        attention.install(model)  # what models/load.py does on the CPU
    return model


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(device: torch.device, run, repeats: int) -> float:
    """Median ms of `run()` over `repeats`, after two untimed runs (the second captures)."""
    for _ in range(2):
        run()
    times = []
    for _ in range(repeats):
        sync(device)
        t = time.perf_counter()
        run()
        sync(device)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def warm_cache(model, capacity: int, length: int, vocab: int, seed: int) -> KVCache:
    """A cache holding `length` random tokens, as a document's prompt would."""
    g = torch.Generator().manual_seed(seed)
    cache = KVCache(model, capacity)
    prefill(model, cache, torch.randint(0, vocab, (length,), generator=g).tolist(), CHUNK, lambda: False)
    return cache


def both(model, device, run, repeats: int, capture: bool) -> tuple[float, float | None]:
    """(eager ms, captured ms): the same run without and with graphs."""
    graphs.detach(model)
    eager = timed(device, run, repeats)
    if not capture:
        return eager, None
    graph_setup.attach(model)
    captured = timed(device, run, repeats)
    return eager, captured


def target_rows(name: str, model, device, sz: Sizes, capture: bool, repeats: int) -> list[Row]:
    cache = warm_cache(model, sz.capacity, sz.cached, model.config.vocab_size, 1)
    rows = []
    for width in sz.widths:
        def one_pass(width=width):
            step(model, cache, list(range(width)), width, 0)
            cache.truncate(sz.cached)
        rows.append(Row(name, f"{width}-row target pass ({sz.cached} cached)",
                        *both(model, device, one_pass, repeats, capture)))

    def chunk():
        prefill(model, cache, cache.tokens + list(range(CHUNK)), CHUNK, lambda: False)
        cache.truncate(sz.cached)
    rows.append(Row(name, f"prefill chunk of {CHUNK}", *both(model, device, chunk, repeats, capture)))
    graphs.detach(model)
    return rows


def draft_rows(model, device, sz: Sizes, capture: bool, repeats: int) -> list[Row]:
    cache = warm_cache(model, sz.draft_capacity, sz.draft_cached, model.config.vocab_size, 2)

    def one_step():
        draft_step(model, cache, [7])
        cache.truncate(sz.draft_cached)
    row = Row("0.5B", f"draft step, 1 row ({sz.draft_cached} cached)", *both(model, device, one_step, repeats, capture))
    graphs.detach(model)
    return [row]


def keystroke(target, draft, sz: Sizes, lookup_only: bool):
    """One keystroke on a warm document: the last EDIT prompt tokens changed; then verify passes
    of width 8, each accepting ACCEPTED drafts and adding the target's own token, until NEW
    tokens. The draft reads what changed (the edit, then each pass's tokens) and proposes
    ACCEPTED + 1 tokens per pass (the last one rejected); with lookup only, no draft runs."""
    t_cache = warm_cache(target, sz.capacity, sz.cached, target.config.vocab_size, 3)
    d_cache = None if lookup_only else warm_cache(draft, sz.draft_capacity, sz.draft_cached, draft.config.vocab_size, 4)
    edit = list(range(100, 100 + EDIT))

    def run():
        t_cache.truncate(sz.cached - EDIT)
        with graphs.suspended(target):  # an edit's size varies: its pass is never a repeated shape
            prefill(target, t_cache, t_cache.tokens + edit[:-1], CHUNK, lambda: False)
        pending = edit[-1:]
        if d_cache is not None:
            d_cache.truncate(sz.draft_cached - EDIT)
            with graphs.suspended(draft):
                draft_step(draft, d_cache, edit[:-1])        # the draft reads the edit too
        made = 0
        while made < NEW:
            proposal = [5] * (ACCEPTED + 1)
            if d_cache is not None:
                draft_step(draft, d_cache, pending)          # the token it has not read
                for _ in range(ACCEPTED):
                    draft_step(draft, d_cache, [5])          # one-token steps
            step(target, t_cache, pending + proposal, 8, 0)
            t_cache.truncate(len(t_cache.tokens) - 1)        # the last draft is rejected
            pending = [6]                                    # the target's own token
            made += ACCEPTED + 1
    return run


def keystroke_rows(name: str, target, draft, device, sz: Sizes, capture: bool, repeats: int) -> list[Row]:
    passes = -(-NEW // (ACCEPTED + 1))
    rows = []
    for lookup_only in (True, False):
        run = keystroke(target, draft, sz, lookup_only)
        models = [target] + ([] if lookup_only else [draft])
        for m in models:
            graphs.detach(m)
        eager = timed(device, run, repeats)
        captured = None
        if capture:
            for m in models:
                graph_setup.attach(m)
            captured = timed(device, run, repeats)
            for m in models:
                graphs.detach(m)
        how = "lookup" if lookup_only else "0.5B draft"
        rows.append(Row(name, f"keystroke, {how}: {EDIT}-token edit, {NEW} new, {passes} passes", eager, captured))
    return rows


def probe(name: str, model, capacity: int, capture: bool, largest: int) -> dict:
    """The width probe (every used width run twice) on the passes the engine would use."""
    graphs.detach(model)
    if capture:
        graph_setup.attach(model)
    started = time.perf_counter()
    try:
        low = smallest_equivalent_width(model, capacity, largest, 0, model.config.vocab_size)
        verdict = {"low": low, "meaning": f"widths {low}..{largest} agree" if low < largest
                   else f"no two widths agree: every pass has {largest} rows"}
    except Nondeterministic as error:
        verdict = {"nondeterministic": str(error)}
    verdict["ms"] = round((time.perf_counter() - started) * 1e3)
    attached = graphs.attached(model)
    if attached is not None:
        verdict["graphs"] = str(attached.stats)
    graphs.detach(model)
    return {"model": name, "largest": largest, **verdict}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="1.5B,7B", help="targets to time (the 0.5B is the draft)")
    p.add_argument("--repeats", type=int, default=0, help="timed runs per figure (default: 20 GPU, 3 CPU)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    small, capture = device.type == "cpu", device.type == "cuda"
    repeats = args.repeats or (20 if capture else 3)
    sz = CPU if small else GPU
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, transformers {_transformers_version()}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if capture else "; CPU sizes: 2 layers, 32768 vocab"))
    if capture:
        print(f"deterministic settings: {make_deterministic(device)}")
    draft = build("0.5B", device, small)
    rows = draft_rows(draft, device, sz, capture, repeats)
    probes = []
    for name in args.models.split(","):
        target = build(name, device, small)
        rows += target_rows(name, target, device, sz, capture, repeats)
        rows += keystroke_rows(name, target, draft, device, sz, capture, max(1, repeats // 2))
        for largest in sz.probe_up_to:
            probes.append(probe(name, target, sz.capacity, capture, largest))
        del target
        if capture:
            torch.cuda.empty_cache()
    probes.append(probe("0.5B", draft, sz.draft_capacity, capture, 8))
    report(rows, probes)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rows": [r.__dict__ for r in rows], "probes": probes}, out, indent=1)
    return 0


def report(rows: list[Row], probes: list[dict]) -> None:
    print("\n| model | pass" + " " * 53 + "|    eager | captured | ratio |")
    print("|-------|" + "-" * 58 + "|----------|----------|-------|")
    for row in rows:
        print(row.line())
    print("\nwidth probe (each used width run twice):")
    for p in probes:
        found = p.get("meaning") or f"NONDETERMINISTIC: {p['nondeterministic']}"
        print(f"  {p['model']:5} up to {p['largest']:2} rows: {found} ({p['ms']} ms)"
              + (f"; graphs: {p['graphs']}" if "graphs" in p else ""))


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


if __name__ == "__main__":
    sys.exit(main())
