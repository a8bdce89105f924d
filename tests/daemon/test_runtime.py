"""Building the engine from the config: what the width probe found is kept per machine and model,
so a restart does not probe again, and anything its answer depends on makes it probe anew."""

from __future__ import annotations

import functools
import json

import pytest

from specd.daemon import runtime
from specd.daemon.config import CompletionSettings, Config, Models
from specd.daemon.runtime import build_engine
from specd.decoding.request import CompletionRequest, RequestError
from specd.decoding.settings import EngineSettings


def _config(target, cache, **engine) -> Config:
    return Config(models=Models(target=str(target), draft="none", device="cpu", cache_dir=str(cache)),
                  engine=EngineSettings(prefix_tokens=256, max_tokens_limit=64, suffix_tokens=16, **engine))


@pytest.fixture(autouse=True)
def curve_always_kept(monkeypatch):
    """A curve measured while the suite keeps the other core busy is not kept, so each start would
    measure its own and may widen or narrow the passes, which makes the probe run again for
    reasons of its own: these tests are about the probe's record, so the curve is kept however
    busy the CPU was (models/curves.py's busy rule has its own tests)."""
    monkeypatch.setattr(runtime, "load_or_measure", functools.partial(runtime.load_or_measure, busy_share=0.0))


def _probe_lines(said: list[str]) -> list[str]:
    return [line for line in said if line.startswith("width probe (")]


def test_the_probe_is_kept_and_measured_again_when_its_key_changes(tiny_target, tmp_path):
    said: list[str] = []
    first = build_engine(_config(tiny_target, tmp_path), progress=said.append)
    assert [line for line in _probe_lines(said) if "kept" not in line], "measured at the first start"
    (record,) = (tmp_path / "measured").glob("probe-*.json")
    assert json.loads(record.read_text()) == {"width": first.width, "low_width": first.low_width, "folds": first.folds}

    # the record is what a restart uses: one that says otherwise is believed, not measured over
    record.write_text(json.dumps({"width": first.width, "low_width": 3, "folds": False}))
    said.clear()
    again = build_engine(_config(tiny_target, tmp_path), progress=said.append)
    assert any("kept from an earlier start" in line for line in _probe_lines(said))
    assert (again.low_width, again.folds) == (3, False)

    # another allowed width changes what the probe answers: measured again, under its own key
    other = build_engine(_config(tiny_target, tmp_path, width=3), progress=said.append)
    assert len(list((tmp_path / "measured").glob("probe-*.json"))) == 2
    assert other.width <= 3 and other.folds == first.folds


def test_a_damaged_record_is_measured_again(tiny_target, tmp_path):
    build_engine(_config(tiny_target, tmp_path))
    (record,) = (tmp_path / "measured").glob("probe-*.json")
    record.write_text('{"low_wid')
    said: list[str] = []
    engine = build_engine(_config(tiny_target, tmp_path), progress=said.append)
    (line,) = _probe_lines(said)
    assert "kept" not in line, line
    assert json.loads(record.read_text())["low_width"] == engine.low_width


@pytest.mark.parametrize("drafter,asked,loaded", [
    ("lookup", (), "none"), ("none", ("lookup",), "none"),
    ("hybrid", (), "builtin"), ("draft", (), "builtin"), ("lookup", ("hybrid",), "builtin"),
])
def test_the_auto_draft_is_loaded_only_where_a_drafter_drafts_with_it(drafter, asked, loaded):
    assert Config(completion=CompletionSettings(drafter=drafter)).draft_to_load(asked) == loaded


@pytest.mark.parametrize("draft", ["none", "builtin", "/models/draft"])
def test_a_draft_named_in_the_config_is_loaded_or_not_as_named(draft):
    assert Config(models=Models(draft=draft)).draft_to_load(("hybrid",)) == draft


def test_without_a_draft_model_a_model_drafter_is_refused_saying_how_to_load_one(tiny_target, tmp_path):
    engine = build_engine(_config(tiny_target, tmp_path))
    with pytest.raises(RequestError, match='models.draft = "auto" loads the built-in one'):
        engine.complete(CompletionRequest(prefix="def f():", drafter="hybrid", document="d"))
