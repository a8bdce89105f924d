"""Convert a GGUF file once into a cached folder (bf16 safetensors + tokenizer, and the file's
quantized blocks for the CPU's kernels).

Dequantizing a GGUF and converting its tokenizer takes most of a minute; loading the converted
folder takes seconds. The folder is written under a temporary name and renamed into place, with a
marker written last (listing every file: models/integrity.py), so a conversion killed halfway
never leaves a folder that is used, and one damaged later is named at load.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from specd.models.groups import write_groups
from specd.models.integrity import Marker, seal

log = logging.getLogger("specd.models")


def convert_gguf(gguf: Path, dest: Path, source: dict | None = None,
                 say: Callable[[str], None] = log.info) -> Path:
    """Dequantize `gguf` into `dest` (bf16 safetensors and a fast tokenizer); return `dest`.
    `say` hears that it starts: it takes most of a minute."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(dest)
    partial = dest.with_name(f"{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    started = time.monotonic()
    try:
        say(f"converting {gguf.name} (tokenizer, then weights); this happens once")
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16,
            quantization_config=GgufConfig(dequantize=True),
        )
        # The weights are plain dense tensors now; only the marker of the GGUF origin remains.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        write_groups(gguf, partial)  # the file's own blocks, for a quantized target (models/groups.py)
        seal(partial, Marker(source=str(gguf), seconds=round(time.monotonic() - started, 1), **(source or {})))
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(partial, dest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return dest


def _remove_stale_partials(dest: Path) -> None:
    """Left-overs of conversions that were killed: never used, removed when the next one starts."""
    for stale in dest.parent.glob(f"{dest.name}.partial-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)) and int(pid) != os.getpid():
            continue  # another process is converting right now
        shutil.rmtree(stale, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
