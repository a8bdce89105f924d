"""`specd bench --profile`: a pass's milliseconds by part beside its floor, on a tiny model with
block weights (specd's kernels, every linear layer Q8_0) and on dense weights."""

from __future__ import annotations

import pytest

from specd.decoding import qkernel
from specd.decoding.profile import ORDER, profile_model, weight_bytes
from tests.conftest import tiny_loaded


@pytest.mark.parametrize("quantize", ["gguf", "none"])
def test_a_pass_is_split_into_its_parts_beside_its_floor(tiny_target, tmp_path, quantize):
    if quantize == "gguf" and not qkernel.available():
        pytest.skip("specd's kernels were not built here")
    loaded = tiny_loaded(tiny_target, cache_dir=tmp_path, dtype="float32", quantize=quantize)
    model = loaded.model
    lm_head = model.get_output_embeddings()
    # every linear layer's weights, the output layer's included, and not the embedding's
    assert weight_bytes(model) > sum(t.numel() * t.element_size() for t in [*lm_head.parameters(), *lm_head.buffers()])
    result = profile_model(model, len(loaded.tokenizer), 0, capacity=1100, gbs=10.0, widths=(1, 4), repeats=2)
    assert result["floor_ms"] == pytest.approx(weight_bytes(model) / 10e9 * 1e3)
    assert set(result["widths"]) == {1, 4}
    for width in result["widths"].values():
        assert list(width["parts"]) == list(ORDER)
        assert width["parts"]["matmuls"] > 0, "the linear layers' hooks timed them"
        assert width["parts"]["attention"] > 0, "attention seen: torch's SDPA, or specd's kernel by its event"
        assert all(ms >= 0 for ms in width["parts"].values())
        assert width["x_floor"] == pytest.approx(width["ms"] / result["floor_ms"])


def test_the_profile_takes_the_configs_auto_as_the_kind_a_start_picks_and_refuses_an_unknown_one():
    from specd.bench.engine import profile_kinds
    from specd.decoding.request import RequestError

    assert profile_kinds(["auto", "int4"]) == ["gguf" if qkernel.available() else "int4", "int4"]
    with pytest.raises(RequestError, match="unknown weight kinds \\['int3'\\]; known: auto, none"):
        profile_kinds(["int3"])
