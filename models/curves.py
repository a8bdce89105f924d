"""The cost curve (decoding/curve.py), measured once per machine and kept beside the quantized
weights, so that a restart reads it instead of timing every width again.

The file is <cache>/quantized/<target folder>-<key>-curve.json, keyed by what decides what a
pass costs: each model's weights (models/quantize.py's `weight_key`: its files, torch's version,
the CPU's kernel level) and weight kind, the CPU's instruction sets, specd's kernel library, the
device and its threads, the dtype, and the shapes the engine runs (its widest pass and its caches' capacities). The key
is also written inside, and a file whose key differs or that cannot be read is measured again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import torch

from specd.decoding.curve import CostCurve
from specd.decoding.loaded import LoadedModel
from specd.decoding.measure import measure_curve
from specd.decoding.settings import EngineSettings
from specd.models.hugepages import wanted as huge_pages_wanted
from specd.models.measured import machine, write_atomic
from specd.models.quantize import weight_key

log = logging.getLogger("specd.models")

VERSION = 2                                              # of the file: raise it when what is measured changes
BUSY_SHARE = 0.8  # a curve measured while the process got less of its threads' time than this is not kept


class CurveFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    key: dict[str, str | int]
    curve: CostCurve


def curve_key(target: LoadedModel, draft: LoadedModel | None, settings: EngineSettings) -> dict[str, str | int]:
    """What the cost of a pass depends on, beyond chance."""
    key: dict[str, str | int] = {
        "version": VERSION, "torch": str(torch.__version__), "cpu": cpu_features(), "device": _device(target),
        "threads": torch.get_num_threads(), "dtype": str(target.dtype),
        "target": f"{target.folder.name}-{weight_key(target.folder)}-{target.weights}",
        "width": settings.width, "capacity": settings.capacity,
        "kernels": machine()["kernels"],  # specd's own: a rebuilt library may cost otherwise
        "huge_pages": int(huge_pages_wanted()),  # where the weights lie: a width-1 pass 25% apart
    }
    if draft is not None:
        key["draft"] = f"{draft.folder.name}-{weight_key(draft.folder)}-{draft.weights}-{draft.dtype}"
        key["draft_capacity"] = settings.draft_capacity
        key["draft_window"] = settings.draft_context_tokens
    return key


def cpu_features() -> str:
    """What decides which kernels run, from models/cpu.py's cpu_flags (the probe's key too): torch's
    level, specd's kernels' body ($SPECD_KERNELS may lower it) and the instruction-set flags, e.g.
    "AVX2 avx2 avx2 fma f16c" here, "AVX512 avx512 avx2 fma f16c avx512f ... amx_int8" elsewhere."""
    cpu = machine()["cpu"]
    return " ".join([cpu["torch"], cpu["kernels"], *cpu["flags"]])


def _device(target: LoadedModel) -> str:
    if target.device.type == "cuda":
        return f"{target.device}: {torch.cuda.get_device_name(target.device)}"
    return str(target.device)


def curve_path(cache_dir: Path, target: LoadedModel, key: dict[str, str | int]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / "quantized" / f"{target.folder.name}-{digest}-curve.json"


def load_or_measure(target: LoadedModel, draft: LoadedModel | None, settings: EngineSettings, cache_dir: Path,
                    say: Callable[[str], None] = log.info, busy_share: float = BUSY_SHARE) -> CostCurve:
    """This machine's curve for these models and settings (the device's defaults filled in): read
    from the cache where it was measured before, else measured now and kept, unless the process
    got less than `busy_share` of its threads' time while measuring."""
    started = time.perf_counter()
    key = curve_key(target, draft, settings)
    path = curve_path(cache_dir, target, key)
    curve, damage = read_curve(path, key)
    if curve is not None:
        say(f"pass costs read from {path} in {(time.perf_counter() - started) * 1e3:.0f} ms "
            f"(measured before in {curve.measured_s:.1f} s)")
        return curve
    if damage:
        log.warning("%s", damage)
        say(f"warning: {damage}")
    say(f"measuring what a pass costs at widths 1..{settings.width}; this happens once on this machine")
    curve = measure_curve(target.model, draft.model if draft else None, settings, len(target.tokenizer))
    if curve.cpu_share < busy_share:
        # Other work held the cores: these times would stand for a busy minute for good.
        log.warning("pass costs measured while the CPU was busy: not kept")
        say(f"pass costs measured in {curve.measured_s:.1f} s, but not kept: the CPU was busy (this process got "
            f"{curve.cpu_share:.0%} of its threads' time); they serve this run, and the next start measures again")
        return curve
    write_curve(path, CurveFile(key, curve))
    say(f"pass costs measured in {curve.measured_s:.1f} s, kept in {path}")
    return curve


def read_curve(path: Path, key: dict[str, str | int]) -> tuple[CostCurve | None, str]:
    """The curve kept at `path` for `key` (None where none is, or another key's), and what is
    wrong with the file where it is damaged."""
    try:
        kept = msgspec.json.decode(path.read_bytes(), type=CurveFile)
    except FileNotFoundError:
        return None, ""
    except (OSError, msgspec.DecodeError) as error:  # msgspec.ValidationError is a DecodeError
        return None, f"{path} is unreadable ({error}); measuring the pass costs again"
    return (kept.curve if kept.key == key else None), ""


def write_curve(path: Path, kept: CurveFile) -> None:
    """Atomically: a start killed while writing leaves no file that is read."""
    write_atomic(path, msgspec.json.format(msgspec.json.encode(kept)))
