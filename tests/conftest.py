"""Shared fixtures: tiny seeded models built from a config (session-wide), and engines on them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tiny import make_draft, make_model

# Nothing in the tests may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny")


@pytest.fixture(scope="session")
def tiny_target(tiny_dir) -> Path:
    return make_model(tiny_dir / "target", vocab_size=400, seed=0)


@pytest.fixture(scope="session")
def tiny_draft(tiny_dir, tiny_target) -> Path:
    """Same tokenizer as the target, other weights: a draft that is right only sometimes."""
    return make_draft(tiny_target, tiny_dir / "draft", seed=1)


def device_under_test() -> str:
    """The device the engine's tests run on: $SPECD_TEST_DEVICE (cpu, cuda, cuda:1), default cpu,
    so that the same suite proves exactness on a GPU when run there."""
    return os.environ.get("SPECD_TEST_DEVICE", "cpu")


def tiny_loaded(folder: Path, role: str = "target", dtype: str = "auto", cache_dir: Path | None = None,
                quantize: str = "none"):
    """A tiny model loaded on the test device, through the same code as the built-in pair."""
    from specd.models.load import load
    from specd.models.specs import parse_spec

    return load(parse_spec(str(folder), role), cache_dir or folder.parent / "cache", device_under_test(), dtype,
                quantize=quantize)


# Hand-made cost curves (ms by width 1..16), where a test needs the policy's choices fixed rather
# than the tiny models' measured ones (a few ms at every width, give or take the machine's noise).
# STEEP: this 2-core AVX2 CPU with torch's int4 kernel (the built-in pair, measured); CHEAP: wide
# passes cost little more than narrow ones and a draft token little, as on an AVX-512 CPU.
STEEP = ((180, 198, 200, 225, 300, 385, 390, 400, 450, 500, 540, 580, 630, 680, 730, 790), 58)
CHEAP = (tuple(100 + 2 * w for w in range(1, 17)), 1)


def hand_curve(shape: tuple[tuple[float, ...], float | None]):
    """A CostCurve of `shape`: target ms by width, and a draft step's ms at every width (None:
    none measured, so drafting is counted free)."""
    from specd.decoding.curve import CostCurve

    target_ms, draft_ms = shape
    return CostCurve(tuple(float(ms) for ms in target_ms),
                     () if draft_ms is None else (float(draft_ms),) * len(target_ms))


def tiny_engine(target: Path, draft: Path | None = None, cache_dir: Path | None = None,
                dtype: str = "auto", quantize: str = "none", curve=None, heads="seeded", **settings):
    """An engine on tiny models, loaded through the same code as the built-in pair. Its cost curve
    is CHEAP unless given, never measured: on the tiny models a draft step costs about what a
    target pass does, give or take the machine's noise, so a measured curve made the policy draft
    a few tokens on one machine and none on CI's (test_bench's draft mode failed there). The
    measurement has its own tests (tests/models/test_curves.py). `heads`: the `heads` drafter's, or
    None for none ("seeded": `seeded_heads`, so that every drafter the registry names is there)."""
    from specd.decoding.engine import Engine
    from specd.decoding.settings import EngineSettings

    cache = cache_dir or target.parent / "cache"
    t = tiny_loaded(target, "target", dtype, cache, quantize)
    d = tiny_loaded(draft, "draft", dtype, cache) if draft else None
    settings.setdefault("prefix_tokens", 256)
    settings.setdefault("suffix_tokens", 64)
    settings.setdefault("max_tokens_limit", 64)
    settings.setdefault("prefill_chunk", 32)
    settings.setdefault("min_probability", 0.0)  # tiny random models are unsure of nearly every token
    settings.setdefault("min_first_probability", 0.0)
    heads = seeded_heads(t) if heads == "seeded" else heads
    return Engine(t, d, EngineSettings(**settings), curve or hand_curve(CHEAP), heads=heads)


def seeded_heads(target, count: int = 3, seed: int = 0):
    """Untrained heads on every token of `target`'s output layer, their blocks seeded at random
    (not Medusa's zero start, where every head guesses what the target does): they propose
    tokens that are right sometimes, which is what the exactness tests need of a drafter."""
    import torch

    from specd.decoding.heads import Heads
    from specd.models.heads import output_rows

    vocab = torch.arange(target.model.config.vocab_size)
    heads = Heads(count, target.model.config.hidden_size, vocab, output_rows(target.model, vocab))
    generator = torch.Generator().manual_seed(seed)
    for block in heads.blocks:
        block.weight.data = torch.randn(block.weight.shape, generator=generator) * 0.05
    return heads.eval()
