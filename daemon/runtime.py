"""Build an engine from the configuration: the one path the daemon, `complete --no-daemon` and
`bench` share, so that tiny test models and the real pair load through the same code."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable

from specd.daemon.config import Config, ConfigError
from specd.decoding.engine import Engine
from specd.decoding.graph_setup import warm_engine
from specd.decoding.layerskip import parse as parse_layers
from specd.decoding.loaded import LoadedModel
from specd.decoding.widths import Probe
from specd.models.curves import load_or_measure
from specd.models.devices import check_quantize, pick_device, pick_quantize
from specd.models.load import load, quantize_int8
from specd.models.measured import keep, model_stamp, recall
from specd.models.specs import parse_spec

log = logging.getLogger("specd")


def load_models(config: Config, pull: bool = False, progress: Callable[[str], None] = log.info,
                drafters: Iterable[str] = ()) -> tuple[LoadedModel, LoadedModel | None]:
    """The target, and the draft model where the default drafter or one of `drafters` uses it
    (Config.draft_to_load)."""
    m = config.models
    draft_spec = config.draft_to_load(drafters)
    device = pick_device(m.device)
    check_quantize(m.quantize, device, "quantize")  # refused before anything loads
    if draft_spec != "none":
        check_quantize(m.draft_quantize, device)
    started = time.perf_counter()
    progress(f"loading target {m.target}")
    target = load(parse_spec(m.target, "target"), config.cache_dir(), m.device, m.dtype, pull=pull, say=progress,
                  quantize=pick_quantize(m.quantize, device))
    draft = None
    if draft_spec != "none":
        progress(f"loading draft {draft_spec}")
        kind = pick_quantize(m.draft_quantize, device, fallback="int8")
        draft = load(parse_spec(draft_spec, "draft"), config.cache_dir(), m.device, m.dtype, pull=pull, say=progress,
                     quantize="gguf" if kind == "gguf" else "none")
        if kind == "int8":
            draft = quantize_int8(draft)
    progress(f"models loaded in {time.perf_counter() - started:.1f} s: target {target.spec}, draft "
             f"{draft.spec if draft else 'none'}, on {target.device} ({target.device_reason}) in "
             f"{str(target.dtype).removeprefix('torch.')}"
             + ("" if target.weights == "none" else f", {target.weights} weights"))
    return target, draft


def build_engine(config: Config, pull: bool = False, progress: Callable[[str], None] = log.info,
                 drafters: Iterable[str] = ()) -> Engine:
    target, draft = load_models(config, pull, progress, drafters)
    settings = config.engine.for_device(target.device.type)
    curve = load_or_measure(target, draft, settings, config.cache_dir(), progress)  # once per machine
    progress(f"pass ms by width: {curve.summary()}")
    started = time.perf_counter()
    parts = _probe_key(target, config)
    kept = recall(config.cache_dir(), "probe", parts) if target.device.type == "cpu" else None
    try:
        probe = Probe(**kept) if kept else None
    except TypeError:  # a record of another shape: measured again
        probe = None
    engine = Engine(target, draft, settings, curve, probe, layerskip_layers(target, config),
                    _heads(config, target, drafters, progress))
    measured = engine.probe is not probe
    if measured and target.device.type == "cpu":   # a GPU probes at every start: its check of repeatability
        keep(config.cache_dir(), "probe", parts, dataclasses.asdict(engine.probe))
    progress(f"width probe ({f'{time.perf_counter() - started:.1f} s' if measured else 'kept from an earlier start'}): "
             f"passes padded to {engine.low_width} of {engine.width} rows (of {settings.width} allowed, the widest "
             f"that can pay here); edits folded into the verify pass: {'yes' if engine.folds else 'no (other bits)'}")
    if (note := warm_engine(engine)) is not None:  # CUDA only (decoding/graph_setup.py)
        progress(note)
    return engine


def _heads(config: Config, target: LoadedModel, drafters: Iterable[str], progress: Callable[[str], None]):
    """The heads `specd heads train` kept for the target, where a drafter asked for uses them;
    a default drafter that cannot run is refused here, before the daemon serves anything."""
    if "heads" not in {config.completion.drafter, *drafters}:
        return None
    from specd.models.heads import load_heads

    heads = load_heads(config.cache_dir(), target) if target.device.type == "cpu" else None
    progress(f"heads: {heads.count} for {target.spec}" if heads else f"heads: none for {target.spec}")
    if heads is None and config.completion.drafter == "heads":
        raise ConfigError(f"completion.drafter = \"heads\", but no heads are trained for {target.spec} on "
                          f"{target.device.type}: run `specd heads train` (they draft where the target runs on a CPU)")
    return heads


def layerskip_layers(target: LoadedModel, config: Config) -> tuple[int, ...] | None:
    """The layers `layerskip` runs: engine.layerskip_layers, where "auto" is the set `specd bench
    --layerskip` chose for this target on this machine (None: none chosen yet, the default)."""
    text, n = config.engine.layerskip_layers, target.model.config.num_hidden_layers
    if text != "auto":
        try:
            return parse_layers(text, n)
        except ValueError as error:
            raise ConfigError(f"engine.layerskip_layers: {error}") from None
    kept = recall(config.cache_dir(), "layerskip", layerskip_key(target))
    return tuple(kept["layers"]) if kept and isinstance(kept.get("layers"), list) else None


def layerskip_key(target: LoadedModel) -> dict:
    return {"model": model_stamp(target.folder, target.weights), "dtype": str(target.dtype)}


def _probe_key(target: LoadedModel, config: Config) -> dict:
    """What the probe's answer depends on: the target's weights and how they run, the settings
    that shape its passes, and (models/measured.py) this machine."""
    e = config.engine
    return {"model": model_stamp(target.folder, target.weights), "dtype": str(target.dtype),
            "lean": hasattr(target.model, "specd_lean"),
            "settings": [e.width, e.narrow_passes, e.fold_prompt, e.prefill_chunk, e.for_device("cpu").capacity]}
