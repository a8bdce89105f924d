"""The K-quant blocks laid out for the AVX2 kernels once, kept, and mapped from the cache at every
later load (models/laidout.py): the same weights, so the same bits, as the file's own layout."""

from __future__ import annotations

import os

import pytest
import torch

from specd.decoding import qkernel
from tests.decoding.test_qkernel import random_blocks, runs_here
from tests.tiny import make_model

pytestmark = pytest.mark.skipif(not qkernel.available() or not runs_here("avx2"),
                                reason="specd's kernels were not built here, or this CPU has no AVX2")

IDS = torch.tensor([list(range(3, 40))])


@pytest.fixture
def kernels():
    """Force a level for one test; the CPU's best again after it."""
    best = qkernel.level()
    yield lambda name: qkernel.level(name)
    qkernel.level(best)


@pytest.fixture(scope="module")
def k_quant_folder(tmp_path_factory):
    """A tiny model (rows of 256 and 512 values, as K-quant blocks need) whose linear layers and
    embedding have Q4_K and Q6_K blocks kept beside it, as a converted GGUF's are."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from specd.models.groups import GROUPS

    folder = make_model(tmp_path_factory.mktemp("kquant") / "model", hidden=256, train_steps=0)
    model = AutoModelForCausalLM.from_pretrained(folder)
    blocks, types = {}, {}
    wanted = [(n, m) for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))]
    for seed, (name, module) in enumerate(wanted):
        six = "v_proj" in name or isinstance(module, torch.nn.Embedding)   # as the GGUF's own mix
        n, k = module.weight.shape
        blocks[name] = random_blocks(qkernel.Q6_K if six else qkernel.Q4_K, n, k, seed=seed)
        types[name] = "Q6_K" if six else "Q4_K"
    save_file(blocks, str(folder / GROUPS), metadata=types)
    return folder


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


def kept_files(cache_dir):
    return sorted((cache_dir / "quantized").glob("*-laid-out.safetensors"))


def test_the_layout_is_made_once_then_read_with_the_same_bits(k_quant_folder, tmp_path, kernels, monkeypatch):
    from specd.models.blocks import block_model

    kernels("portable")            # the file's own layout: nothing laid out, nothing kept
    natural, counts = block_model(k_quant_folder, tmp_path)
    assert set(counts) == {"Q4_K", "Q6_K"} and kept_files(tmp_path) == []

    kernels("avx2")
    said: list[str] = []
    first, counts = block_model(k_quant_folder, tmp_path, said.append)
    assert set(counts) == {"Q4_K paired", "Q6_K paired"}
    assert any("laying out" in line for line in said) and len(kept_files(tmp_path)) == 1

    def no_layout(*args):
        raise AssertionError("the second load lays the blocks out again")

    monkeypatch.setattr(qkernel, "relayout", no_layout)
    said.clear()
    again, counts = block_model(k_quant_folder, tmp_path, said.append)
    assert set(counts) == {"Q4_K paired", "Q6_K paired"} and not any("laying out" in line for line in said)
    assert torch.equal(logits(first), logits(natural)), "paired blocks compute the file's bits"
    assert torch.equal(logits(again), logits(first)), "the kept blocks are the ones laid out"


def test_a_damaged_file_is_laid_out_again(k_quant_folder, tmp_path, kernels):
    from specd.models.blocks import block_model

    kernels("avx2")
    first, _ = block_model(k_quant_folder, tmp_path)
    [path] = kept_files(tmp_path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(100)
    said: list[str] = []
    again, _ = block_model(k_quant_folder, tmp_path, said.append)
    assert any("laying out" in line for line in said)
    assert kept_files(tmp_path) == [path] and path.stat().st_size == size
    assert torch.equal(logits(again), logits(first))


def test_new_blocks_replace_the_kept_layout(k_quant_folder, tmp_path, kernels):
    """The key names the blocks file it was made from: a newer file is laid out again, and the
    older layout is removed, not left taking a gigabyte for the real target."""
    from specd.models.blocks import block_model
    from specd.models.groups import GROUPS

    kernels("avx2")
    block_model(k_quant_folder, tmp_path)
    [old] = kept_files(tmp_path)
    stat = (k_quant_folder / GROUPS).stat()
    try:
        os.utime(k_quant_folder / GROUPS, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        block_model(k_quant_folder, tmp_path)
        [new] = kept_files(tmp_path)
        assert new != old and not old.exists()
    finally:
        os.utime(k_quant_folder / GROUPS, ns=(stat.st_atime_ns, stat.st_mtime_ns))
