"""Build an engine from the configuration: the one path the daemon, `complete --no-daemon` and
`bench` share, so that tiny test models and the real pair load through the same code."""

from __future__ import annotations

import logging
import time
from typing import Callable

from specd.daemon.config import Config
from specd.decoding.engine import Engine
from specd.decoding.graphs import warm_engine
from specd.decoding.loaded import LoadedModel
from specd.models.curves import load_or_measure
from specd.models.devices import check_quantize, pick_device, pick_quantize
from specd.models.load import load, quantize_int8
from specd.models.specs import parse_spec

log = logging.getLogger("specd")


def load_models(config: Config, pull: bool = False,
                progress: Callable[[str], None] = log.info) -> tuple[LoadedModel, LoadedModel | None]:
    m = config.models
    device = pick_device(m.device)
    check_quantize(m.quantize, device, "quantize")  # refused before anything loads
    if m.draft != "none":
        check_quantize(m.draft_quantize, device)
    started = time.perf_counter()
    progress(f"loading target {m.target}")
    target = load(parse_spec(m.target, "target"), config.cache_dir(), m.device, m.dtype, pull=pull, say=progress,
                  quantize=pick_quantize(m.quantize, device))
    draft = None
    if m.draft != "none":
        progress(f"loading draft {m.draft}")
        draft = load(parse_spec(m.draft, "draft"), config.cache_dir(), m.device, m.dtype, pull=pull, say=progress)
        if m.draft_quantize == "int8" or (m.draft_quantize == "auto" and draft.device.type == "cpu"):
            draft = quantize_int8(draft)
    progress(f"models loaded in {time.perf_counter() - started:.1f} s: target {target.spec}, draft "
             f"{draft.spec if draft else 'none'}, on {target.device} ({target.device_reason}) in "
             f"{str(target.dtype).removeprefix('torch.')}" + ("" if target.weights == "none" else f", {target.weights} weights"))
    return target, draft


def build_engine(config: Config, pull: bool = False, progress: Callable[[str], None] = log.info) -> Engine:
    target, draft = load_models(config, pull, progress)
    settings = config.engine.for_device(target.device.type)
    curve = load_or_measure(target, draft, settings, config.cache_dir(), progress)  # once per machine
    progress(f"pass ms by width: {curve.summary()}")
    engine = Engine(target, draft, settings, curve)
    progress(f"width probe: passes padded to {engine.low_width} of {engine.width} rows (of {settings.width} "
             f"allowed, the widest that can pay here); edits folded into the verify pass: "
             f"{'yes' if engine.folds else 'no (other bits)'}")
    if (note := warm_engine(engine)) is not None:  # CUDA only (decoding/graphs.py)
        progress(note)
    return engine
