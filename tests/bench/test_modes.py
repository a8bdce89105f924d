"""`specd bench`: every mode on the same cases and models, the JSON the closing notes quote."""

from __future__ import annotations

import json

import pytest

from specd.bench.engine import read_cases
from specd.bench.modes import Case, bench
from specd.decoding.request import CompletionRequest, RequestError
from tests.conftest import tiny_engine

CASES = [Case(prefix="def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n", suffix="\n\nprint(add(1, 2))\n"),
         Case(prefix="class Parser:\n    def parse(self, text):\n        ", suffix="\n")]
FIELDS = {"cases", "new_tokens", "prefill_s", "decode_s", "tokens_per_s", "speedup_vs_none", "target_forwards",
          "proposed", "accepted", "acceptance", "identical_to_none", "per_case"}


@pytest.fixture(scope="module")
def engine(tiny_target, tiny_draft):
    return tiny_engine(tiny_target, tiny_draft, pace_drafts=False)


@pytest.fixture(scope="module")
def result(engine):
    modes = ["lookup", "draft", "hybrid", "none@1", "hf-greedy", "hf-assisted", "hf-lookup", "none"]
    return bench(engine, CASES, modes, max_tokens=24, progress=lambda line: None)


def test_every_mode_reports_every_field(result):
    assert list(result["modes"])[0] == "none", "the baseline runs first"
    for mode, m in result["modes"].items():
        assert FIELDS <= set(m), f"{mode} lacks {FIELDS - set(m)}"
        assert m["cases"] == len(CASES) and len(m["per_case"]) == len(CASES)
        assert all("text" in case for case in m["per_case"])
    json.dumps(result)


def test_the_baseline_is_plain_greedy_one_pass_a_token(engine, result):
    """`none` reports what the engine gives for each case without a drafter, and takes one target
    pass per token (one more where a stop token ended it)."""
    none = result["modes"]["none"]
    for case, reported in zip(CASES, none["per_case"]):
        alone = engine.complete(CompletionRequest(prefix=case.prefix, suffix=case.suffix, document="alone",
                                                  max_tokens=24, drafter="none", stop_at_suffix=False))
        engine.forget("alone")
        assert reported["text"] == alone.text and reported["new_tokens"] == len(alone.tokens) > 0
        assert len(alone.tokens) <= reported["target_forwards"] <= len(alone.tokens) + 1


def test_every_engine_mode_is_identical_to_plain_greedy_in_fewer_passes(result):
    none = result["modes"]["none"]
    for mode in ("lookup", "draft", "hybrid"):
        m = result["modes"][mode]
        assert [c["text"] for c in m["per_case"]] == [c["text"] for c in none["per_case"]], mode
        assert m["identical_to_none"] == len(CASES), mode
        assert 0 < m["accepted"] <= m["proposed"], mode
        assert m["target_forwards"] < none["target_forwards"], f"{mode}: accepted drafts save target passes"


def test_anchors_ran_on_the_same_prompts(result):
    for mode in ("hf-greedy", "hf-assisted", "hf-lookup"):
        assert result["modes"][mode]["new_tokens"] > 0, mode


def test_a_bad_case_line_is_named(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"prefix": "x = 1"}\n{"suffix": "no prefix"}\n')
    with pytest.raises(RequestError, match="cases.jsonl:2"):
        read_cases(cases, None)


def test_the_draft_models_prompt_reading_counts_as_prefill(tiny_target, tiny_draft):
    from specd.bench.modes import run_engine

    engine = tiny_engine(tiny_target, tiny_draft, pace_drafts=False)
    seen = []
    complete = engine.complete
    engine.complete = lambda request: seen.append(complete(request)) or seen[-1]
    run = run_engine(engine, CASES[0], "draft", 24, "prefill")
    s = seen[0].stats
    assert s.draft_prefill_ms > 0, "the draft read its window on its first proposal"
    assert s.draft_prefill_ms <= s.draft_ms
    assert run.prefill_s * 1e3 == pytest.approx(s.prefill_ms + s.draft_prefill_ms)
    assert run.decode_s * 1e3 == pytest.approx(s.total_ms - s.tokenize_ms - s.prefill_ms - s.draft_prefill_ms)


def test_bench_quantize_runs_each_weight_kind_side_by_side(tmp_path, tiny_target, tiny_draft):
    """`specd bench --quantize none,int4`: both targets resident, the same cases, the table and JSON."""
    from tests.homes import make_home

    home = make_home(tmp_path, tiny_target, tiny_draft)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"prefix": c.prefix, "suffix": c.suffix, "middle": "    return a - b"}) + "\n"
                             for c in CASES))
    out = tmp_path / "weights.json"
    run = home.specd("bench", "--cases", str(cases), "--quantize", "none,int4", "--modes", "lookup",
                     "--max-tokens", "12", "--json", str(out))
    assert run.returncode == 0, run.stderr
    assert "int4" in run.stdout and "ms/pass" in run.stdout
    result = json.loads(out.read_text())
    assert list(result["weights"]) == ["none", "int4"] and result["mode"] == "lookup"
    assert result["settings"]["low_widths"]["int4"] == 1 and result["settings"]["folds"]["int4"] is True
    for kind, m in result["weights"].items():
        assert m["cases"] == len(CASES) and m["new_tokens"] > 0 and m["ms_per_pass"] > 0, kind
        assert 0 <= m["first_line_same"] <= len(CASES) and 0 <= m["first_line_right"] <= len(CASES)
    bad = home.specd("bench", "--cases", str(cases), "--quantize", "none,int3")
    assert bad.returncode == 2 and "int3" in bad.stderr and "Traceback" not in bad.stderr


def test_the_modes_race_over_max_tokens_whatever_the_doubt_stop(tmp_path, tiny_target, tiny_draft):
    """`specd bench --modes`: the config's doubt stops (engine.min_probability and
    min_first_probability) end a suggestion for a person; a tiny random model doubts every token,
    and with them on each case would end after one token or none. The modes' race runs without."""
    from tests.homes import make_home

    home = make_home(tmp_path, tiny_target, tiny_draft)
    text = home.config_path.read_text().replace("min_probability = 0 ", "min_probability = 0.8 ")
    home.config_path.write_text(text.replace("min_first_probability = 0\n", "min_first_probability = 0.5\n"))
    assert (home.config().engine.min_probability, home.config().engine.min_first_probability) == (0.8, 0.5)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"prefix": c.prefix, "suffix": c.suffix}) + "\n" for c in CASES))
    out = tmp_path / "modes.json"
    run = home.specd("bench", "--cases", str(cases), "--modes", "none,lookup", "--max-tokens", "12", "--json", str(out))
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["settings"]["min_probability"] == result["settings"]["min_first_probability"] == 0.0
    for mode, m in result["modes"].items():
        assert m["new_tokens"] > 2 * len(CASES), f"{mode}: {m['new_tokens']} tokens: the doubt stop ended the cases"
    assert result["modes"]["lookup"]["identical_to_none"] == len(CASES)
