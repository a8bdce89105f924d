"""A pass through each layer's torch ops against the same pass with each layer one kernel call
(decoding/fused.py), on the built-in pair, alternating pass by pass in one process.

A pass's time on a busy 2-core VM moves by 10-20% from one minute to the next, more than the
difference measured; alternating the two forwards over the same model, cache and rows puts both
under the same load. Prints ms per pass (the median of --repeats each) at each width, over a
~1000-token cache, and the floor (the weights' bytes over the bandwidth measured in the run).

    .venv/bin/python -m specd.bench.layer_ab --widths 1,4,8,16 --repeats 21
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specd.bench.layer_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", default="1,4,8,16")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--config", type=Path, help="a config file (default: specd's own): its target and draft")
    args = parser.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",")]

    import msgspec
    import torch

    from specd.daemon.config import load_config
    from specd.daemon.runtime import load_models
    from specd.decoding.forward import prefill
    from specd.decoding.kvcache import KVCache
    from specd.decoding.lean import Lean
    from specd.decoding.profile import CACHED, bandwidth_gbs, weight_bytes
    from specd.models.cpu import cpu_flags
    from specd.models.hugepages import in_huge_pages
    from specd.models.load import use_threads

    config = load_config(args.config)
    gbs = bandwidth_gbs(in_huge_pages([torch.ones(512 << 18)])[0])
    target, draft = load_models(msgspec.structs.replace(config, models=msgspec.structs.replace(
        config.models, quantize="gguf")), progress=lambda line: None, drafters=("draft",))
    use_threads(target.weights)
    print(f"{cpu_flags()}; memory bandwidth {gbs:.1f} GB/s; ms per pass, median of {args.repeats}, alternating")
    for role, loaded in (("target", target), ("draft", draft)):
        model = loaded.model
        forwards = {"torch ops": Lean(model, fuse=False), "one call per layer": Lean(model, fuse=True)}
        assert forwards["one call per layer"].fused is not None, f"the {role}'s layers cannot run in one call"
        ids = torch.randint(0, len(loaded.tokenizer), (CACHED + max(widths),),
                            generator=torch.Generator().manual_seed(0)).tolist()
        floor = weight_bytes(model) / (gbs * 1e9) * 1e3
        print(f"\n{role}: floor {floor:.1f} ms")
        print(f"{'width':>5} " + " ".join(f"{name:>20}" for name in forwards) + "   ratio   x floor")
        caches = {name: _filled(model, lean, ids, prefill, KVCache) for name, lean in forwards.items()}
        for width in widths:
            times = {name: [] for name in forwards}
            for _ in range(args.repeats + 1):            # pass by pass, one forward then the other
                for name, lean in forwards.items():
                    times[name].append(_pass(model, lean, caches[name], ids[CACHED:CACHED + width]))
            a, b = (statistics.median(t[1:]) for t in times.values())
            print(f"{width:5d} {a:20.1f} {b:20.1f}   {b / a:5.2f}   {b / floor:5.2f}")
    return 0


def _filled(model, lean, ids, prefill, KVCache):
    """A cache of CACHED tokens written by `lean` (each forward reads its own: their bits differ)."""
    from specd.decoding.profile import CACHED

    model.specd_lean = lean
    cache = KVCache(model, CACHED + 128)
    prefill(model, cache, ids[:CACHED], 128, lambda: False)
    return cache


def _pass(model, lean, cache, rows: list[int]) -> float:
    """ms of one pass of `rows` after the cache's tokens, which it then puts back."""
    start = time.perf_counter()
    lean(cache, rows, len(rows))
    took = (time.perf_counter() - start) * 1e3
    cache.rewind(range(len(model.model.layers)), len(cache.tokens))
    return took


if __name__ == "__main__":
    sys.exit(main())
