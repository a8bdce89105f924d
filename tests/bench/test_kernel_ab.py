"""bench/kernel_ab.py: two builds of the kernels timed side by side on one layer's blocks, their
outputs compared bit for bit."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from specd.bench import kernel_ab
from specd.decoding import qkernel

pytestmark = pytest.mark.skipif(not qkernel.available(), reason="specd's kernels were not built here")


def blocks_file(path):
    """One layer of random Q4_K and Q6_K blocks (sane fp16 scales), typed as conversion writes them."""
    rng = np.random.default_rng(0)
    tensors, types = {}, {}
    for name, kind, n, k in (("model.layers.0.mlp.up_proj", qkernel.Q4_K, 64, 512),
                             ("model.layers.0.mlp.down_proj", qkernel.Q6_K, 32, 512),
                             ("model.layers.1.mlp.up_proj", qkernel.Q4_K, 8, 256)):
        values, size = qkernel.BLOCK[kind]
        blocks = rng.integers(0, 256, size=(n * k // values, size), dtype=np.uint8)
        scale = np.full((len(blocks), 1), 0.01, np.float16).view(np.uint8)
        if kind == qkernel.Q4_K:
            blocks[:, 0:2], blocks[:, 2:4] = scale, scale
        else:
            blocks[:, 208:210] = scale
        tensors[name] = torch.from_numpy(blocks.reshape(n, -1))
        types[name] = qkernel.NAMES[kind]
    save_file(tensors, str(path), metadata=types)
    return path


def test_it_reads_one_layers_matrices_with_their_types(tmp_path):
    matrices = kernel_ab.layer_matrices(blocks_file(tmp_path / "b.safetensors"), 0)
    assert sorted((m.name, m.kind, m.k) for m in matrices) == [
        ("model.layers.0.mlp.down_proj", qkernel.Q6_K, 512), ("model.layers.0.mlp.up_proj", qkernel.Q4_K, 512)]


def test_two_copies_of_the_library_time_the_same_bits(tmp_path, capsys):
    built = qkernel.library_path()
    copy = tmp_path / "copy.so"
    shutil.copy(built, copy)
    code = kernel_ab.main([str(built), str(copy), "--blocks", str(blocks_file(tmp_path / "b.safetensors")),
                           "--layer", "0", "--widths", "1,3", "--reps", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 matrices of layer 0" in out
    assert [line.split(":")[0] for line in out.splitlines()[1:]] == ["width  1", "width  3"]


def test_outputs_that_differ_in_one_bit_are_refused():
    y = torch.randn(2, 8)
    kernel_ab.check_same_bits("m", 2, {"before": y, "after": y.clone()})
    off = y.clone()
    off[1, 3] = torch.nextafter(off[1, 3], torch.tensor(float("inf")))
    with pytest.raises(AssertionError, match="m at width 2: after differs from before"):
        kernel_ab.check_same_bits("m", 2, {"before": y, "after": off})
