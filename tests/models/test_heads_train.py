"""`specd heads train`'s work on a tiny target: the features, the fit, the score, the kept file,
and a run stopped part-way that resumes where it stopped."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
import torch

from specd.decoding.heads import Heads
from specd.models import heads as training
from specd.models.heads import Plan, Stopped, heads_path, heads_record, labels, load_heads, train_heads
from tests.conftest import tiny_loaded

PLAN = dict(count=2, tokens=2000, window=64, vocab=200, epochs=3, batch=32)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A folder of real source text: the standard library modules the tiny tokenizer was not
    trained on."""
    import calendar  # noqa: E401
    import csv
    import difflib
    import fractions
    import heapq
    import shlex
    import statistics

    folder = tmp_path_factory.mktemp("source")
    for module in (calendar, csv, difflib, fractions, heapq, shlex, statistics):
        lines = inspect.getsource(module).splitlines(keepends=True)
        for part in range(0, len(lines), 60):  # files of 60 lines: many files, some held back
            (folder / f"{module.__name__}_{part // 60}.py").write_text("".join(lines[part:part + 60]))
    return folder


@pytest.fixture(scope="module")
def target(tiny_target):
    return tiny_loaded(tiny_target, dtype="fp32")


def test_labels_are_the_targets_next_tokens_within_each_window():
    targets = torch.tensor([10, 11, 12, 13, 20, 21, 22])
    got = labels(targets, torch.tensor([4, 3]), 2)
    assert got.tolist() == [[11, 12], [12, 13], [13, -1], [-1, -1], [21, 22], [22, -1], [-1, -1]]


def test_a_stopped_run_resumes_and_the_heads_are_kept_for_the_target(target, source, tmp_path):
    plan = Plan(folder=str(source), **PLAN)
    lines: list[str] = []

    def stop_while_fitting(line: str) -> None:
        lines.append(line)
        if line.startswith("fitting: epoch 2/"):
            raise KeyboardInterrupt

    with pytest.raises(Stopped, match="resumes"):
        train_heads(target, tmp_path, plan, stop_while_fitting)
    assert load_heads(tmp_path, target) is None, "nothing is kept before the run ends"
    features = heads_path(tmp_path, target).parent
    assert len(list(features.glob("*.features/fit-*.pt"))) == 1, "the fit's checkpoint is kept"
    lines.clear()
    record = train_heads(target, tmp_path, plan, lines.append)
    assert any(line.startswith("using the features kept") for line in lines)
    assert any(line.startswith("fitting: resumed at epoch 2") for line in lines)
    assert not any(line.startswith("reading") for line in lines), "the features were kept"
    heads = load_heads(tmp_path, target)
    assert isinstance(heads, Heads) and heads.count == 2
    assert heads_record(tmp_path, target) == json.loads(json.dumps(record))
    assert record["train_tokens"] >= 1000 and record["held_tokens"] > 0 and len(record["accuracy"]) == 2
    assert not list(features.glob("*.features/fit-*.pt")), "the checkpoint goes once the heads are kept"
    lines.clear()  # another fit of the same text reads nothing again
    again = train_heads(target, tmp_path, Plan(folder=str(source), **{**PLAN, "epochs": 1}), lines.append)
    assert not any(line.startswith("reading") for line in lines) and again["plan"]["epochs"] == 1


def test_fitting_makes_the_heads_guess_the_target_better(target, source, tmp_path):
    plan = Plan(folder=str(source), **PLAN)
    work = tmp_path / "work"
    work.mkdir()
    train_windows, held_windows = training.corpus_windows(target.tokenizer, plan, lambda line: None)
    training.read("train", target, train_windows, work, lambda line: None)
    rows = training._load_features(work, "train")
    vocab = training.top_tokens(rows[1], plan.vocab)
    heads = Heads(plan.count, rows[0].shape[1], vocab, training.output_rows(target.model, vocab))
    before = training.score(heads, rows, plan.count)
    training.fit(heads, rows, plan, work / "fit.pt", lambda line: None)
    after = training.score(heads, rows, plan.count)
    assert all(a > b for a, b in zip(after, before)), (before, after)


def test_a_damaged_heads_file_is_not_used(target, tmp_path):
    path = heads_path(tmp_path, target)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a safetensors file")
    assert load_heads(tmp_path, target) is None


def test_a_plan_on_too_little_text_says_so(target, tmp_path):
    (tmp_path / "one.py").write_text(textwrap.dedent("""\
        def f(x):
            return x + 1
    """) * 60)
    with pytest.raises(training.ModelError, match="too little text"):
        train_heads(target, tmp_path / "cache", Plan(folder=str(tmp_path), **PLAN), lambda line: None)
