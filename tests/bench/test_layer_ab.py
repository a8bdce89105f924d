"""bench/layer_ab.py: the torch ops against one call per layer, alternating, on the configured pair."""

from __future__ import annotations

import pytest

from specd.bench import layer_ab
from specd.decoding import qkernel
from tests.homes import make_home

pytestmark = pytest.mark.skipif(not qkernel.available(), reason="specd's kernels were not built here")


def test_it_times_both_forwards_of_target_and_draft(tmp_path, tiny_target, tiny_draft, capsys):
    home = make_home(tmp_path, tiny_target, tiny_draft)
    assert layer_ab.main(["--config", str(home.config_path), "--widths", "1,3", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "target: floor" in out and "draft: floor" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1"], ["3"])]
    assert [row[0] for row in rows] == ["1", "3", "1", "3"], out
    for row in rows:                      # width, torch ops ms, one call ms, ratio, x floor
        assert all(float(value) > 0 for value in row[1:]), row
