"""Loading a spec into a `LoadedModel`: resolve its folder, pick device and dtype, load tokenizer
and weights, put the engine's attention in place, quantize a target's weights where asked; and
int8 weights for a draft on the CPU."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch

from specd.decoding.loaded import LoadedModel, ModelError, ModelSpec
from specd.models.devices import decide_device, pick_dtype
from specd.models.resolve import resolve

log = logging.getLogger("specd.models")

THREADS = torch.get_num_threads()  # torch's default: one per core


def use_threads(weights: str) -> None:
    """Who runs in parallel: with block weights specd's kernels take every core and torch's own
    ops run on the calling thread. Both pools wait for work by spinning, and on 2 cores torch's
    threads spinning after an op halved the matmul that followed (a width-1 pass 231 ms against
    112 ms); elsewhere torch keeps its default."""
    if weights == "gguf":
        from specd.decoding import qkernel

        qkernel.threads(THREADS)
        torch.set_num_threads(1)
    else:
        torch.set_num_threads(THREADS)


def load(spec: ModelSpec, cache_dir: Path, device: str = "auto", dtype: str = "auto",
         pull: bool = False, say: Callable[[str], None] = log.info, quantize: str = "none") -> LoadedModel:
    """`quantize`: none, int8 or int4 weights on torch's kernels (models/quantize.py), or gguf, the
    GGUF's own blocks on specd's (models/blocks.py); the quantized ones CPU only, cached after the
    first time."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve(spec, cache_dir, pull=pull, say=say)
    choice = decide_device(device)
    if choice.warning and spec.role == "target":  # once, not again for the draft
        log.warning(choice.warning)
        say(choice.warning)
    dev = torch.device(choice.device)
    if dev.type == "cuda":  # before the first kernel: cuBLAS reads its workspace setting once
        from specd.decoding.determinism import make_deterministic

        log.debug("deterministic CUDA: %s", make_deterministic(dev))
    if quantize == "gguf":
        return _load_blocks(spec, folder, cache_dir, dev, choice.reason, say)
    # bf16 activations where the weights are int8 or int4: torch's kernels for them are vectorized
    # for bf16 and several times slower in float32 (an AVX2 CPU without bf16 otherwise gets float32)
    dt = pick_dtype("bf16" if dtype == "auto" and quantize != "none" else dtype, dev)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dt, device_map=str(dev))
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot load {spec.role} model {spec} from {folder}: {error}") from None
    model.eval()
    if model.config._attn_implementation == "sdpa":
        from specd.decoding import attention

        attention.install(model)  # grouped heads read in place, not copied (decoding/attention.py)
    if quantize != "none":
        from specd.models.devices import check_quantize
        from specd.models.quantize import quantize as quantize_weights

        check_quantize(quantize, dev, "quantize")
        counts = quantize_weights(model, folder, quantize, cache_dir, say)
        log.info("%s weights: %s", spec.role, ", ".join(f"{n} layers {k}" for k, n in counts.items() if n))
    if dev.type == "cuda":
        from specd.decoding import graph_setup

        graph_setup.attach(model)  # repeated pass shapes replay as CUDA graphs (decoding/graphs.py)
    return LoadedModel(spec, folder, tokenizer, model, dev, dt, device_reason=choice.reason, weights=quantize)


def _load_blocks(spec: ModelSpec, folder: Path, cache_dir: Path, dev: torch.device, reason: str,
                 say: Callable[[str], None]) -> LoadedModel:
    """The `gguf` weights: GGUF blocks on specd's kernels, float32 between them (models/blocks.py)."""
    from transformers import AutoTokenizer

    from specd.decoding import attention, lean, qkernel
    from specd.models.blocks import block_model
    from specd.models.devices import check_quantize

    check_quantize("gguf", dev, "quantize" if spec.role == "target" else "draft_quantize")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model, counts = block_model(folder, cache_dir, say)
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot load {spec.role} model {spec} from {folder}: {error}") from None
    if model.config._attn_implementation == "sdpa":
        attention.install(model)
    lean.attach(model)  # the engine's passes skip transformers' plumbing where the model fits
    use_threads("gguf")
    log.info("%s weights: %s", spec.role, ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    # `specd status` says which of the kernels' bodies runs here (README, "Quantized weights")
    return LoadedModel(spec, folder, tokenizer, model, dev, torch.float32,
                       device_reason=f"{reason}; specd's kernels: {qkernel.level()}", weights="gguf")


def quantize_int8(loaded: LoadedModel) -> LoadedModel:
    """Int8 weights (per channel, dynamic activations) for a draft on the CPU: a step costs a
    fraction of a bf16 one (README's tables). Every token it proposes is verified by the target,
    so quantizing it can change acceptance, never the output."""
    import warnings

    assert loaded.device.type == "cpu", "dynamic int8 kernels are CPU kernels"
    model = loaded.model.float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's notice that the API moves to torchao
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
        model = quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                 inplace=True)  # no copy of the float model
    return LoadedModel(loaded.spec, loaded.folder, loaded.tokenizer, model, loaded.device, torch.float32,
                       loaded.device_reason, weights="dynamic-int8")
