"""The settings that make CUDA repeat its bits: what `make_deterministic` sets (the flags are
process-wide and settable without a GPU; each test puts them back)."""

from __future__ import annotations

import os

import pytest
import torch

from specd.decoding.determinism import make_deterministic

FLAGS = {
    "flash": (torch.backends.cuda.flash_sdp_enabled, torch.backends.cuda.enable_flash_sdp),
    "cudnn_sdp": (torch.backends.cuda.cudnn_sdp_enabled, torch.backends.cuda.enable_cudnn_sdp),
    "efficient": (torch.backends.cuda.mem_efficient_sdp_enabled, torch.backends.cuda.enable_mem_efficient_sdp),
    "math": (torch.backends.cuda.math_sdp_enabled, torch.backends.cuda.enable_math_sdp),
}
ATTRS = [(torch.backends.cudnn, "deterministic"), (torch.backends.cudnn, "benchmark"),
         (torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
         (torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
         (torch.backends.cuda.matmul, "fp32_precision"), (torch.backends.cudnn, "fp32_precision")]


@pytest.fixture
def restored(monkeypatch):
    """Whatever a test sets comes back as it was."""
    import torch.utils.deterministic as deterministic

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    flags = {name: get() for name, (get, _) in FLAGS.items()}
    attrs = [(obj, name, getattr(obj, name)) for obj, name in ATTRS if hasattr(obj, name)]
    was = torch.are_deterministic_algorithms_enabled(), deterministic.fill_uninitialized_memory
    yield
    for name, (_, set_) in FLAGS.items():
        set_(flags[name])
    for obj, name, value in attrs:
        setattr(obj, name, value)
    torch.use_deterministic_algorithms(was[0])
    deterministic.fill_uninitialized_memory = was[1]


def test_cuda_gets_deterministic_kernels_one_attention_backend_and_full_precision_sums(restored):
    applied = make_deterministic(torch.device("cuda"))
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert not torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    assert not torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    assert {name: get() for name, (get, _) in FLAGS.items()} == {
        "flash": False, "cudnn_sdp": False, "efficient": True, "math": True}
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"  # no TF32
    assert applied.settings["use_deterministic_algorithms"] is True and not applied.skipped
    assert "CUBLAS_WORKSPACE_CONFIG=:4096:8" in str(applied)


def test_a_deterministic_workspace_already_set_is_kept(restored, monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    make_deterministic(torch.device("cuda"))
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_the_cpu_is_left_alone(restored):
    before = {name: get() for name, (get, _) in FLAGS.items()}, torch.are_deterministic_algorithms_enabled()
    applied = make_deterministic(torch.device("cpu"))
    assert applied.settings == {} and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert ({name: get() for name, (get, _) in FLAGS.items()}, torch.are_deterministic_algorithms_enabled()) == before
