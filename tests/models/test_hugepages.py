"""The block weights copied into memory advised for 2 MB pages (models/hugepages.py): the same
bytes, a tied layer still shared, an untied embedding left mapped, the same bits from a model, and
left where they were when asked."""

from __future__ import annotations

import pytest
import torch

from specd.decoding.blocks import BlockLinear
from specd.models import hugepages
from tests.models.test_laidout import k_quant_folder, kernels, logits  # noqa: F401 (fixtures)

needs_thp = pytest.mark.skipif(not hugepages.wanted(), reason="no transparent huge pages on this machine")


def mapping_of(tensor: torch.Tensor) -> dict[str, str]:
    """The /proc/self/smaps fields of the mapping that holds `tensor`'s first byte."""
    address, fields, inside = tensor.data_ptr(), {}, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(part, 16) for part in head.split("-"))
                if inside:
                    break
                inside = low <= address < high
            elif inside:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
    return fields


@needs_thp
def test_tensors_are_copied_into_one_region_advised_for_huge_pages(monkeypatch):
    monkeypatch.delenv("SPECD_HUGE_PAGES", raising=False)
    blocks = torch.randint(0, 256, (300, 144), dtype=torch.uint8)
    floats = torch.randn(7, 33)
    placed = hugepages.in_huge_pages([blocks, floats, blocks])
    assert [t.shape for t in placed] == [blocks.shape, floats.shape, blocks.shape]
    assert [t.dtype for t in placed] == [torch.uint8, torch.float32, torch.uint8]
    assert torch.equal(placed[0], blocks) and torch.equal(placed[1], floats)
    assert placed[0].data_ptr() != blocks.data_ptr(), "a copy, not the tensor it was given"
    assert placed[2].data_ptr() == placed[0].data_ptr(), "one tensor given twice is copied once"
    assert placed[1].data_ptr() % hugepages.ALIGN == 0
    advised = mapping_of(placed[0])
    assert advised.get("THPeligible") == "1", f"the region is not advised for huge pages: {advised}"


def test_turned_off_the_tensors_stay_where_they_are(monkeypatch):
    monkeypatch.setenv("SPECD_HUGE_PAGES", "0")
    assert not hugepages.wanted()
    blocks = torch.randint(0, 256, (30, 144), dtype=torch.uint8)
    [same] = hugepages.in_huge_pages([blocks])
    assert same is blocks


@needs_thp
def test_a_block_model_in_huge_pages_computes_the_same_bits(k_quant_folder, tmp_path, kernels, monkeypatch):  # noqa: F811
    from specd.models.blocks import block_model

    monkeypatch.setenv("SPECD_HUGE_PAGES", "0")
    mapped, _ = block_model(k_quant_folder, tmp_path)
    monkeypatch.delenv("SPECD_HUGE_PAGES")
    placed, _ = block_model(k_quant_folder, tmp_path)
    linear = next(m for m in placed.modules() if isinstance(m, BlockLinear))
    assert mapping_of(linear.blocks).get("THPeligible") == "1"
    embedding = mapping_of(placed.model.embed_tokens.blocks).get("THPeligible")
    if placed.config.tie_word_embeddings:  # the output layer streams it: one copy, shared
        assert placed.lm_head.blocks.data_ptr() == placed.model.embed_tokens.blocks.data_ptr()
        assert embedding == "1"
    else:  # a few rows a pass: left mapped, not made resident whole
        assert embedding != "1"
    assert torch.equal(logits(placed), logits(mapped))


@needs_thp
def test_a_tied_embedding_is_placed_with_the_output_layer_that_streams_it(monkeypatch):
    from specd.models.blocks import _streamed_in_huge_pages

    monkeypatch.delenv("SPECD_HUGE_PAGES", raising=False)
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(4, 8)
    model.proj, model.head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)
    table, proj = torch.randint(0, 256, (4, 144), dtype=torch.uint8), torch.randint(0, 256, (8, 144), dtype=torch.uint8)
    untied = _streamed_in_huge_pages(model, {"embed": (12, table), "proj": (12, proj), "head": (12, table.clone())})
    assert id(table) not in untied and id(proj) in untied
    tied = _streamed_in_huge_pages(model, {"embed": (12, table), "proj": (12, proj), "head": (12, table)})
    assert torch.equal(tied[id(table)], table) and mapping_of(tied[id(table)]).get("THPeligible") == "1"


@needs_thp
def test_the_pages_a_copy_read_from_a_mapped_file_are_let_go(tmp_path, monkeypatch):
    """safetensors maps a file whole: a tensor of it left mapped (an untied embedding) would keep
    every page the copy read resident. The copied tensors' pages leave the process; the file's
    bytes are still there to read."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    monkeypatch.delenv("SPECD_HUGE_PAGES", raising=False)
    layers = torch.randint(0, 256, (4096, 1024), dtype=torch.uint8)     # 4 MB, streamed
    table = torch.randint(0, 256, (1024, 1024), dtype=torch.uint8)      # 1 MB, left mapped
    save_file({"layers": layers, "table": table}, str(tmp_path / "blocks.safetensors"))
    with safe_open(str(tmp_path / "blocks.safetensors"), "pt") as f:
        mapped, kept = f.get_tensor("layers"), f.get_tensor("table")
    assert any(low <= mapped.data_ptr() < high for low, high in hugepages._file_mappings()), \
        "safetensors maps the file"
    mapped.sum(), kept.sum()                                             # both read in
    before = int(mapping_of(mapped)["Rss"].split()[0])
    [copy] = hugepages.in_huge_pages([mapped])
    after = int(mapping_of(kept)["Rss"].split()[0])
    assert after <= before - 3 * 1024, f"{before} kB resident before the copy, {after} kB after"
    assert torch.equal(copy, layers) and torch.equal(mapped, layers) and torch.equal(kept, table)
