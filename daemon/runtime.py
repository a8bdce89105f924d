"""Build an engine from the configuration: the one path the daemon, `complete --no-daemon` and
`bench` share, so that tiny test models and the real pair load through the same code."""

from __future__ import annotations

import logging
import time

from daemon.config import Config
from decoding.engine import Engine
from decoding.models import LoadedModel, load, parse_spec, quantize_int8

log = logging.getLogger("specd")

def load_models(config: Config, pull: bool = False) -> tuple[LoadedModel, LoadedModel | None]:
    m = config.models
    started = time.perf_counter()
    target = load(parse_spec(m.target, "target"), config.cache_dir(), m.device, m.dtype, pull=pull)
    draft = None
    if m.draft != "none":
        draft = load(parse_spec(m.draft, "draft"), config.cache_dir(), m.device, m.dtype, pull=pull)
        if m.draft_quantize == "int8" or (m.draft_quantize == "auto" and draft.device.type == "cpu"):
            draft = quantize_int8(draft)
    log.info("models loaded in %.1f s: target %s, draft %s, on %s in %s", time.perf_counter() - started,
             target.spec, draft.spec if draft else "none", target.device, str(target.dtype).removeprefix("torch."))
    return target, draft

def build_engine(config: Config, pull: bool = False) -> Engine:
    target, draft = load_models(config, pull)
    return Engine(target, draft, config.engine_settings(target.device.type))
