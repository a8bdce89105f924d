"""The cost curve is measured once per machine and kept: a second start reads it without running a
pass, a changed key measures again, and so does a damaged file, with a warning."""

from __future__ import annotations

import logging
import os

import msgspec
import pytest

from specd.daemon.config import Config, Models
from specd.daemon.runtime import build_engine, load_models
from specd.decoding.settings import EngineSettings
from specd.models import curves
from specd.models.cpu import cpu_flags
from specd.models.curves import CurveFile, curve_key, curve_path
from tests.conftest import tiny_loaded

SETTINGS = EngineSettings(prefix_tokens=256, suffix_tokens=64, max_tokens_limit=64, prefill_chunk=32)


def load_or_measure(*args):
    """Kept whatever else the machine runs meanwhile (another test run on these cores, say): these
    tests check the keeping; the rule for a busy CPU has its own test."""
    return curves.load_or_measure(*args, busy_share=0.0)


@pytest.fixture
def pair(tiny_target, tiny_draft, tmp_path):
    return tiny_loaded(tiny_target, "target", cache_dir=tmp_path), tiny_loaded(tiny_draft, "draft", cache_dir=tmp_path)


def counted(*loaded) -> list[int]:
    """A counter of forward passes of these models, from now on."""
    passes = [0]
    for model in loaded:
        model.model.register_forward_pre_hook(lambda module, args: passes.__setitem__(0, passes[0] + 1))
    return passes


def test_measured_once_then_read_without_a_pass(pair, tmp_path):
    target, draft = pair
    passes = counted(target, draft)
    lines: list[str] = []
    first = load_or_measure(target, draft, SETTINGS, tmp_path, lines.append)
    measured = passes[0]
    assert measured > 2 * SETTINGS.width, "every width of both models was timed"
    assert len(first.target_ms) == len(first.draft_ms) == SETTINGS.width
    path = curve_path(tmp_path, target, curve_key(target, draft, SETTINGS))
    assert path.parent == tmp_path / "quantized" and path.name.endswith("-curve.json")
    assert msgspec.json.decode(path.read_bytes(), type=CurveFile).curve == first
    assert [p.name for p in path.parent.iterdir()] == [path.name], "no partial file is left"
    second = load_or_measure(target, draft, SETTINGS, tmp_path, lines.append)
    assert second == first and passes[0] == measured, "read back, not one pass run"
    assert "measured in" in lines[1] and "read from" in lines[-1]


def test_a_changed_key_measures_again(pair, tmp_path, tiny_draft):
    target, draft = pair
    load_or_measure(target, draft, SETTINGS, tmp_path)
    passes = counted(target, draft)
    load_or_measure(target, None, SETTINGS, tmp_path)                   # no draft: another key
    without_draft = passes[0]
    assert without_draft > 0
    load_or_measure(target, draft, msgspec.structs.replace(SETTINGS, width=4), tmp_path)
    assert passes[0] > without_draft, "another widest pass: another key"
    weights = next(tiny_draft.glob("*.safetensors"))
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the draft's weights changed
    try:
        before = passes[0]
        load_or_measure(target, draft, SETTINGS, tmp_path)
        assert passes[0] > before
    finally:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert len(list((tmp_path / "quantized").glob("*-curve.json"))) == 4
    # the kernels' body is part of the key: SPECD_KERNELS=avx2 on an AVX-512 CPU measures its own curve
    assert curve_key(target, draft, SETTINGS)["cpu"].split()[:2] == [cpu_flags()["torch"], cpu_flags()["kernels"]]


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"key": {}, "curve": {"target_ms": [-1.0]}}'],
                         ids=["empty", "torn", "invalid"])
def test_a_damaged_file_is_measured_again_with_a_warning(pair, tmp_path, caplog, damage):
    target, draft = pair
    first = load_or_measure(target, draft, SETTINGS, tmp_path)
    path = curve_path(tmp_path, target, curve_key(target, draft, SETTINGS))
    path.write_bytes(damage)
    passes = counted(target, draft)
    lines: list[str] = []
    with caplog.at_level(logging.WARNING, logger="specd.models"):
        again = load_or_measure(target, draft, SETTINGS, tmp_path, lines.append)
    assert passes[0] > 0 and len(again.target_ms) == len(first.target_ms)
    assert any("unreadable" in r.getMessage() for r in caplog.records)
    assert lines[0].startswith("warning:") and str(path) in lines[0]
    assert msgspec.json.decode(path.read_bytes(), type=CurveFile).curve == again, "the file is whole again"


def test_a_second_start_builds_its_engine_on_the_kept_curve(tiny_target, tiny_draft, tmp_path):
    config = Config(models=Models(target=str(tiny_target), draft=str(tiny_draft), device="cpu",
                                  cache_dir=str(tmp_path)), engine=SETTINGS)
    target, draft = load_models(config, progress=lambda line: None)  # the daemon's models: int4, dynamic int8
    kept = load_or_measure(target, draft, config.engine.for_device("cpu"), tmp_path)
    lines: list[str] = []
    engine = build_engine(config, progress=lines.append)
    assert engine.curve == kept
    assert any("pass costs read from" in line for line in lines)
    assert not any("measuring" in line or "measured in" in line for line in lines), "nothing measured"
    assert any(line.startswith("pass ms by width: target 1:") for line in lines)


def test_a_curve_measured_while_the_cpu_was_busy_serves_but_is_not_kept(pair, tmp_path):
    """A share no process can get (over 1) makes any measurement a busy one."""
    target, draft = pair
    lines: list[str] = []
    curve = curves.load_or_measure(target, draft, SETTINGS, tmp_path, lines.append, busy_share=1.01)
    assert len(curve.target_ms) == SETTINGS.width and 0 < curve.cpu_share <= 1
    assert "not kept: the CPU was busy" in lines[-1]
    assert not (tmp_path / "quantized").exists() or not list((tmp_path / "quantized").glob("*-curve.json"))



@pytest.mark.skipif(not __import__("specd.decoding.qkernel", fromlist=["x"]).available(),
                    reason="specd's kernels were not built here")
def test_the_busy_share_counts_the_threads_a_pass_keeps_busy(tiny_target, tmp_path):
    """With block weights torch keeps one thread and specd's kernels take the cores (spinning
    between calls): the share is over the kernels' threads. Over torch's one it read as the whole
    machine's while a compiler held half of it, and that curve was kept."""
    import torch

    from specd.decoding import qkernel
    from specd.decoding.measure import busy_threads
    from specd.models.load import load
    from specd.models.specs import parse_spec

    gguf = load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize="gguf")
    dense = load(parse_spec(str(tiny_target)), tmp_path, "cpu", "fp32")
    before = qkernel.threads_in_use()
    try:
        assert qkernel.threads(3) == 3 and torch.get_num_threads() < 3
        assert busy_threads(gguf.model) == 3, "the kernels' pool, not torch's one thread"
        assert busy_threads(dense.model) == torch.get_num_threads(), "no block weights: torch's threads"
    finally:
        qkernel.threads(before)
