"""What the engine is given: a loaded model (tokenizer and causal LM on a device, in a dtype), and
the check that a draft may draft for a target.

Finding, fetching, converting and loading a model is I/O and lives beside the engine, in
specd.models; this module only names the result. No torch at import time: the command line
imports `ModelError` without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from specd.decoding.errors import UserError

if TYPE_CHECKING:
    import torch

Role = Literal["target", "draft"]


class ModelError(UserError):
    """A model cannot be resolved or loaded; the message says why and what to do."""


@dataclass(frozen=True)
class ModelSpec:
    """Where a model comes from (specd.models.specs parses one from the config's text)."""
    kind: Literal["builtin", "folder", "gguf", "hub"]
    ref: str  # builtin name, path, or hub id
    role: Role = "target"

    def __str__(self) -> str:
        return f"builtin:{self.ref}" if self.kind == "builtin" else self.ref


@dataclass
class LoadedModel:
    spec: ModelSpec
    folder: Path
    tokenizer: Any
    model: torch.nn.Module
    device: torch.device
    dtype: torch.dtype
    device_reason: str = ""   # why this device, in words ("auto: NVIDIA H200 (torch 2.13.0+cu128)")
    weights: str = "none"     # quantized linear weights: none, int8 or int4 (models/quantize.py),
                              # dynamic-int8 (a draft)


def check_pair(target: LoadedModel, draft: LoadedModel) -> None:
    """A draft proposes token ids the target verifies, so both must mean the same by every id."""
    problems = []
    if target.tokenizer.get_vocab() != draft.tokenizer.get_vocab():
        problems.append("their vocabularies differ")
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        if getattr(target.tokenizer, name) != getattr(draft.tokenizer, name):
            problems.append(f"{name} differs ({getattr(target.tokenizer, name)} vs "
                            f"{getattr(draft.tokenizer, name)})")
    if problems:
        raise ModelError(f"draft model {draft.spec} cannot draft for target model {target.spec}: "
                         + "; ".join(problems))
