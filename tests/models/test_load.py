"""Model specs and loading: folders, GGUF files, vocabulary checks, conversions that are
interrupted, and `specd models`' info."""

from __future__ import annotations

import pytest
import torch

from specd.decoding.loaded import ModelError, check_pair
from specd.models.info import info
from specd.models.integrity import is_converted
from specd.models.load import load
from specd.models.resolve import resolve
from specd.models.specs import gguf_folder, parse_spec
from tests.tiny import make_model


def logits_of(loaded, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return loaded.model(torch.tensor([ids])).logits[0].float()


def test_load_from_a_folder(tiny_target, tmp_path):
    loaded = load(parse_spec(str(tiny_target)), tmp_path, "cpu", "fp32")
    assert loaded.spec.kind == "folder" and loaded.dtype == torch.float32
    assert loaded.tokenizer.convert_tokens_to_ids("<|fim_middle|>") is not None
    assert logits_of(loaded, [1, 2, 3]).shape == (3, len(loaded.tokenizer))


def test_load_from_gguf_converts_once_and_matches_the_original(tiny_target, tiny_gguf, tmp_path):
    spec = parse_spec(str(tiny_gguf))
    assert spec.kind == "gguf"
    loaded = load(spec, tmp_path, "cpu", "fp32")
    folder = gguf_folder(tiny_gguf, tmp_path)
    assert is_converted(folder) and loaded.folder == folder
    original = load(parse_spec(str(tiny_target)), tmp_path, "cpu", "fp32")
    ids = original.tokenizer.encode("def f(x):\n    return x", add_special_tokens=False)
    assert loaded.tokenizer.encode("def f(x):\n    return x", add_special_tokens=False) == ids
    # the GGUF holds bf16-rounded weights once converted: close, not identical
    torch.testing.assert_close(logits_of(loaded, ids), logits_of(original, ids), atol=0.15, rtol=0.05)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert load(spec, tmp_path, "cpu", "fp32").folder == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp, "converted twice"


def test_specs_that_cannot_be_resolved_are_refused(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        parse_spec(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelError, match="unknown built-in"):
        parse_spec("builtin:gpt-17")
    with pytest.raises(ModelError, match="not in the Hugging Face cache"):
        resolve(parse_spec("nobody/no-such-model"), tmp_path)
    with pytest.raises(ModelError, match="specd models pull"):
        resolve(parse_spec("builtin", "draft"), tmp_path)


def test_a_draft_with_another_vocabulary_is_refused_naming_both(tiny_target, tiny_dir, tmp_path):
    other = make_model(tiny_dir / "other-vocab", vocab_size=300, seed=3)
    target = load(parse_spec(str(tiny_target)), tmp_path, "cpu")
    draft = load(parse_spec(str(other), "draft"), tmp_path, "cpu")
    with pytest.raises(ModelError, match="vocabularies differ") as error:
        check_pair(target, draft)
    assert str(tiny_target) in str(error.value) and str(other) in str(error.value)


def test_an_interrupted_conversion_is_never_used(tiny_gguf, tmp_path, monkeypatch):
    from transformers import PreTrainedTokenizerFast

    def killed(self, *args, **kwargs):  # the weights are written; then the process is stopped
        raise KeyboardInterrupt

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", killed)
    with pytest.raises(KeyboardInterrupt):
        resolve(parse_spec(str(tiny_gguf)), tmp_path)
    folder = gguf_folder(tiny_gguf, tmp_path)
    assert not folder.exists() and not list(folder.parent.glob("*.partial-*"))
    monkeypatch.undo()
    assert info(parse_spec(str(tiny_gguf)), tmp_path).converted is False
    # A process killed outright leaves its partial folder behind: it is ignored, then cleared.
    stale = folder.with_name(f"{folder.name}.partial-999999999")
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half a file")
    assert resolve(parse_spec(str(tiny_gguf)), tmp_path) == folder and is_converted(folder)
    assert not stale.exists()


def test_models_info_reads_sizes_without_loading(tiny_target, tmp_path):
    i = info(parse_spec(str(tiny_target)), tmp_path)
    assert i.converted and i.parameters and i.parameters > 10_000 and i.dtype == "F32"
    assert i.bytes_on_disk > 0
