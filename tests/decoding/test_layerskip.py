"""`layerskip`: the target drafting through a subset of its own layers, on its own cache. Its
exactness is test_exactness.py's (it iterates the registry); here: the cache it shares is left as
the target needs it, the layer sets, and the search that keeps the fastest set for the daemon."""

from __future__ import annotations

import pytest

from specd.bench.modes import Case, layerskip_search
from specd.daemon.config import Config, ConfigError, Models
from specd.daemon.runtime import build_engine, layerskip_layers
from specd.decoding import layerskip
from specd.decoding.drafter import DraftJob
from specd.decoding.request import CompletionRequest
from specd.decoding.settings import EngineSettings
from tests.conftest import tiny_engine

PREFIX = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n"
CASES = [Case(prefix=PREFIX, suffix="\n"), Case(prefix="class Parser:\n    def parse(self, text):\n        ")]


@pytest.fixture(scope="module")
def engine(tiny_target):
    return tiny_engine(tiny_target, pace_drafts=False)


def test_a_proposal_leaves_every_layer_of_the_targets_cache_where_it_was(engine):
    prompt = engine.build_prompt(PREFIX)
    slot = engine._pool.get("shared")
    from specd.decoding.forward import prefill
    prefill(engine.target.model, slot.target, prompt.ids[:-1], 64, lambda: False)
    before = [slot.target.positions(i) for i in range(len(slot.target.past.layers))]
    drafter = engine._drafters["layerskip"]
    proposal = drafter.begin(DraftJob(prompt, target_cache=slot.target)).propose(list(prompt.ids), 6)
    assert proposal.forwards >= 1, "it ran its layers (and wrote their keys past the verified tokens)"
    assert [slot.target.positions(i) for i in range(len(slot.target.past.layers))] == before
    assert slot.target.tokens == prompt.ids[:-1]


def test_it_drafts_through_fewer_layers_than_the_target(engine):
    n = engine.target.model.config.num_hidden_layers
    assert 0 < len(engine.layers) < n and engine.layers == layerskip.default(n)
    result = engine.complete(CompletionRequest(prefix=PREFIX, drafter="layerskip", max_tokens=16, document="ls"))
    assert result.stats.proposed.get("layerskip", 0) > 0


@pytest.mark.parametrize("n", [2, 4, 24, 28, 36])
def test_every_candidate_set_is_a_proper_subset_in_order(n):
    for name, kept in layerskip.candidates(n).items():
        assert kept == tuple(sorted(set(kept))) and 0 < len(kept) <= n and all(0 <= i < n for i in kept), name
        assert layerskip.parse(layerskip.spell(kept), n) == kept


@pytest.mark.parametrize("text,match", [("0-40", "outside"), ("3-1", "outside"), ("a-b", "not a layer"),
                                        ("0-4,2-6", "once each"), ("", "not a layer")])
def test_a_bad_layer_set_says_what_is_wrong(text, match):
    with pytest.raises(ValueError, match=match):
        layerskip.parse(text, 28)


def test_the_search_keeps_the_fastest_exact_set_and_the_daemon_uses_it(tiny_target, tmp_path):
    config = Config(models=Models(target=str(tiny_target), draft="none", device="cpu", cache_dir=str(tmp_path)),
                    engine=EngineSettings(prefix_tokens=256, max_tokens_limit=64, suffix_tokens=16))
    engine = build_engine(config, progress=lambda line: None)
    assert layerskip_layers(engine.target, config) is None, "nothing chosen yet: the default"
    from specd.bench.engine import EngineBench, run_bench
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(f'{{"prefix": {c.prefix!r}, "suffix": {c.suffix!r}}}\n'.replace("'", '"') for c in CASES))
    result = run_bench(config, EngineBench(cases, [], max_tokens=16, layerskip=True), lambda line: None)
    sets = result["layerskip"]
    assert set(sets) == set(layerskip.candidates(result["layers"]))
    assert all(s["identical_to_none"] == len(CASES) for s in sets.values()), "every set gives plain decoding's tokens"
    chosen = result["chosen"]
    assert sets[chosen]["tokens_per_s"] == max(s["tokens_per_s"] for s in sets.values())
    kept = layerskip_layers(engine.target, config)
    assert kept == layerskip.parse(sets[chosen]["layers"], result["layers"])
    assert build_engine(config, progress=lambda line: None).layers == kept


def test_a_layer_set_in_the_config_is_used_or_refused_naming_the_key(tiny_target, tmp_path):
    def config(text: str) -> Config:
        return Config(models=Models(target=str(tiny_target), draft="none", device="cpu", cache_dir=str(tmp_path)),
                      engine=EngineSettings(prefix_tokens=256, max_tokens_limit=64, suffix_tokens=16,
                                            layerskip_layers=text))
    assert build_engine(config("0"), progress=lambda line: None).layers == (0,)
    with pytest.raises(ConfigError, match="engine.layerskip_layers: .*outside"):
        build_engine(config("0-99"), progress=lambda line: None)


def test_search_direct(engine):
    result = layerskip_search(engine, CASES[:1], 8, progress=lambda line: None)
    assert result["chosen"] in result["layerskip"] and result["none"]["cases"] == 1
