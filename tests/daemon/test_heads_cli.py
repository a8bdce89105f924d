"""`specd heads train|show` as a user runs them, and a daemon whose default drafter is `heads`:
refused at start while no heads are trained, serving once they are."""

from __future__ import annotations

import inspect
import json

import pytest

from tests.homes import make_home


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    import calendar
    import difflib
    import fractions
    import statistics

    folder = tmp_path_factory.mktemp("code")
    for module in (calendar, difflib, fractions, statistics):
        lines = inspect.getsource(module).splitlines(keepends=True)
        for part in range(0, len(lines), 60):
            (folder / f"{module.__name__}_{part // 60}.py").write_text("".join(lines[part:part + 60]))
    return folder


@pytest.mark.parametrize("args, said", [
    (("--heads", "0"), "--heads must be 1..8"),
    (("--tokens", "10"), "--tokens must be at least 1000"),
    (("--folder", "/no/such/folder"), "not a folder"),
])
def test_bad_options_are_refused_in_one_line(fresh_home, args, said):
    result = fresh_home.specd("heads", "train", *args)
    assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_heads_daemon_is_refused_until_heads_are_trained_then_serves(tmp_path, tiny_target, tiny_draft, source):
    home = make_home(tmp_path, tiny_target, tiny_draft)
    config = home.config_path.read_text().replace("[completion]\n", '[completion]\ndrafter = "heads"\n')
    home.config_path.write_text(config)
    shown = home.specd("heads", "show")
    assert shown.returncode == 1 and "no heads trained" in shown.stdout
    refused = home.specd("start")
    assert refused.returncode != 0 and "specd heads train" in refused.stderr, refused.stderr
    trained = home.specd("heads", "train", "--folder", str(source), "--heads", "2", "--tokens", "1000", "--epochs", "1")
    assert trained.returncode == 0, trained.stderr
    assert "2 heads, trained on" in trained.stdout and "fitting:" in trained.stderr
    assert home.specd("heads", "show").stdout == trained.stdout
    try:
        assert home.specd("start").returncode == 0
        code = tmp_path / "add.py"
        code.write_text("def add(a, b):\n    return")
        done = home.specd("complete", "--file", str(code), "--json", "--drafter", "heads")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["outcome"] == "done"
    finally:
        home.specd("stop")
