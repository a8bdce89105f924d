"""Build a model whose linear layers and embedding are GGUF blocks run by specd's kernels
(decoding/blocks.py): the `gguf` weights.

The model is made on the meta device from its config (no dense weights are ever materialized:
reading the 1.5B target's bf16 copy alone would take 3.5 GB and seconds), then each linear layer
and the embedding get their blocks: the GGUF file's own, kept at conversion (models/groups.py),
and Q8_0 for any layer the file has in another type or where no file stands behind the folder
(those are quantized once, from the converted weights, and cached like models/quantize.py's). The
rest (norms, biases) is read from the folder's safetensors in float32, in which the whole model
then computes between the matmuls. Each K-quant tensor is held as the kernels in use read it
fastest (qkernel.layout: the AVX2 body's paired layout), laid out once and kept (models/laidout.py),
and read from 2 MB pages (models/hugepages.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import torch

from specd.decoding.blocks import BlockEmbedding, BlockLinear, q8_0
from specd.decoding.qkernel import Q8_0
from specd.models.groups import GROUPS, read_blocks
from specd.models.hugepages import in_huge_pages
from specd.models.laidout import laid_out
from specd.models.quantize import read_cached, write_cached

log = logging.getLogger("specd.models")

VERSION = 1  # of the cached Q8_0 layers: raise it when what is saved changes


def block_model(folder: Path, cache_dir: Path, say: Callable[[str], None] = log.info) -> tuple[torch.nn.Module, dict]:
    """The model in `folder` with block weights, in float32; and how many layers got each type."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    dense = _Dense(folder)
    kept = read_blocks(folder)
    counts: dict[str, int] = {}
    for name, kind, raw in _blocks(model, kept, dense, folder, cache_dir, say):
        module = model.get_submodule(name)
        if isinstance(module, torch.nn.Embedding):
            model.set_submodule(name, BlockEmbedding(kind, raw, module.embedding_dim))
        else:
            model.set_submodule(name, BlockLinear(kind, raw, module.in_features, dense.get(f"{name}.bias")))
        counts[_type_name(kind)] = counts.get(_type_name(kind), 0) + 1
    _materialize(model, dense)
    model.eval()
    return model, counts


def _targets(model: torch.nn.Module) -> list[str]:
    """The modules that take blocks: every linear layer and the input embedding."""
    return [name for name, m in model.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))]


def _blocks(model, kept: dict, dense: _Dense, folder: Path, cache_dir: Path, say):
    """(name, kind, raw) for every module `_targets` names: the file's blocks, else Q8_0. A tied
    output layer shares the embedding's blocks, as the file does."""
    names = _targets(model)
    tied = getattr(model.config, "tie_word_embeddings", False) and "lm_head" in names
    own = [n for n in names if not (tied and n == "lm_head")]
    missing = [n for n in own if n not in kept]
    made = _q8_layers(missing, dense, folder, cache_dir, say) if missing else {}
    kept = laid_out({n: kept[n] for n in own if n in kept}, folder / GROUPS, cache_dir, say)
    chosen = {n: kept[n] if n in kept else (Q8_0, made[n]) for n in own}
    if tied:
        chosen["lm_head"] = chosen["model.embed_tokens"]
    placed = _streamed_in_huge_pages(model, chosen)
    for name, (kind, raw) in chosen.items():
        yield name, kind, placed.get(id(raw), raw)


def _streamed_in_huge_pages(model, chosen: dict[str, tuple[int, torch.Tensor]]) -> dict[int, torch.Tensor]:
    """Copies in 2 MB pages (models/hugepages.py) of the blocks every pass streams, by the id of
    the tensor each replaces: every linear layer's, and so a tied embedding's. An untied embedding
    stays mapped: a pass reads a few of its rows, and copying it would make 190 MB of the built-in
    target's resident that never are."""
    streamed = list({id(raw): raw for name, (_, raw) in chosen.items()
                     if not isinstance(model.get_submodule(name), torch.nn.Embedding)}.values())
    return {id(raw): copy for raw, copy in zip(streamed, in_huge_pages(streamed))}


def _q8_layers(names: list[str], dense: _Dense, folder: Path, cache_dir: Path, say) -> dict[str, torch.Tensor]:
    """Q8_0 blocks for `names`, from the converted weights: cached, since quantizing a 1.5B model
    takes a while."""
    path = cache_dir / "quantized" / f"{folder.name}-{_key(folder, names)}-q8_0.safetensors"
    if (cached := read_cached(path)) is not None and set(cached) == set(names):
        return cached
    say(f"quantizing {len(names)} layers of {folder.name} to Q8_0; this happens once")
    made = {name: q8_0(dense.weight(name)) for name in names}
    write_cached(path, made)
    return made


def _key(folder: Path, names: list[str]) -> str:
    stamps = [VERSION, names]
    for f in sorted(folder.glob("*.safetensors")):
        stat = f.stat()
        stamps.append((f.name, stat.st_size, stat.st_mtime_ns))
    return hashlib.sha256(json.dumps(stamps).encode()).hexdigest()[:16]


def _materialize(model: torch.nn.Module, dense: _Dense) -> None:
    """Give every parameter still on the meta device its weights, and rebuild modules whose
    buffers are computed at construction (the rotary embedding's frequencies) on the CPU."""
    for name, param in list(model.named_parameters()):
        if param.is_meta:
            owner, leaf = name.rsplit(".", 1)
            model.get_submodule(owner).register_parameter(
                leaf, torch.nn.Parameter(dense.get(name, required=True), requires_grad=False))
    for name, module in list(model.named_modules()):
        if any(b.is_meta for b in module.buffers(recurse=False)):
            with torch.device("cpu"):
                model.set_submodule(name, type(module)(model.config))


def _type_name(kind: int) -> str:
    from specd.decoding.qkernel import NAMES

    return NAMES[kind]


class _Dense:
    """The folder's safetensors, read one tensor at a time (in float32)."""

    def __init__(self, folder: Path):
        from safetensors import safe_open

        self.files = [safe_open(str(f), "pt") for f in sorted(folder.glob("*.safetensors"))
                      if not f.name.startswith("specd-")]
        self.where = {name: f for f in self.files for name in f.keys()}

    def get(self, name: str, required: bool = False) -> torch.Tensor | None:
        if name not in self.where:
            assert not required, f"{name} is not in the model's safetensors"
            return None
        return self.where[name].get_tensor(name).float()

    def weight(self, module: str) -> torch.Tensor:
        """A module's dense weight (the embedding's for a tied output layer)."""
        name = f"{module}.weight"
        if name not in self.where and module == "lm_head":
            name = "model.embed_tokens.weight"
        return self.get(name, required=True)
