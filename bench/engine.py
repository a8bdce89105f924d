"""`specd bench`: every mode on the same cases and models in one process (bench/modes.py runs
them); here the cases are read, the modes checked before any model loads, and the settings noted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from specd.daemon.config import Config


def read_cases(path: Path, limit: int | None) -> list:
    from specd.bench.modes import Case
    from specd.decoding.request import RequestError

    cases = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                cases.append(msgspec.json.decode(line, type=Case))
            except msgspec.ValidationError as error:
                raise RequestError(f"{path}:{number}: {error}") from None
    if not cases:
        raise RequestError(f"{path} holds no cases")
    return cases[:limit] if limit else cases


@dataclass(frozen=True)
class EngineBench:
    """What `specd bench` runs: these cases in these modes (the anchors too, if asked)."""
    cases: Path
    modes: list[str]
    anchors: bool = False
    max_tokens: int = 48
    limit: int | None = None                 # only the first N cases
    suffix_budgets: list[int] | None = None  # instead of speed: first-line quality per suffix budget
    quantize: list[str] | None = None        # instead of the modes: the first mode on each weight kind
    layerskip: bool = False                  # instead of the modes: layerskip's layer sets, the fastest kept


def run_bench(config: Config, plan: EngineBench, log: Callable[[str], None]) -> dict:
    """The results (bench/modes.py's dict) and the settings they were measured with."""
    from specd.bench.modes import ANCHORS, bench, fewer_heads, suffix_sweep
    from specd.daemon.runtime import build_engine
    from specd.decoding.registry import DRAFTERS
    from specd.decoding.request import RequestError

    cases = read_cases(plan.cases, plan.limit)
    modes = plan.modes + (list(ANCHORS) if plan.anchors else [])
    known = set(DRAFTERS) | {"none@1"} | set(ANCHORS)
    if unknown := [m for m in modes if m not in known and not fewer_heads(m)]:
        raise RequestError(f"unknown modes {unknown}; known: {', '.join(sorted(known))}, heads@K (the first K heads)")
    if plan.quantize:
        return _weights(config, plan, cases, log)
    if not plan.suffix_budgets:
        # the modes (and the layer sets) race over the same max_tokens: the doubt stop
        # (engine.min_probability and min_first_probability), a rule for what a person is shown,
        # would end most cases after a token or two, with nothing to race
        config = msgspec.structs.replace(config, engine=msgspec.structs.replace(
            config.engine, min_probability=0.0, min_first_probability=0.0))
    if plan.layerskip:
        return _layerskip(config, plan, cases, log)
    # hf-assisted drafts with the draft model too; heads@K with the kept heads
    wanted_heads = max(map(fewer_heads, modes), default=0)
    engine = build_engine(config, drafters=[*modes, *(["draft"] if "hf-assisted" in modes else []),
                                            *(["heads"] if wanted_heads else [])])
    kept_heads = engine.heads.count if engine.heads else 0
    if wanted_heads > kept_heads:
        raise RequestError(f"heads@{wanted_heads} needs that many heads kept for the target ({kept_heads} are): "
                           f"`specd heads train --heads {wanted_heads}`")
    if plan.suffix_budgets:
        result = suffix_sweep(engine, cases, plan.suffix_budgets, plan.max_tokens, log)
    else:
        result = bench(engine, cases, modes, plan.max_tokens, log)
    result["settings"] = _settings(engine, plan)
    return result


def _weights(config: Config, plan: EngineBench, cases: list, log: Callable[[str], None]) -> dict:
    """One engine per weight kind, all resident, so that their cases take turns in one run."""
    from specd.bench.modes import weights_bench
    from specd.daemon.runtime import build_engine
    from specd.decoding.request import RequestError
    from specd.models.quantize import KINDS

    if unknown := [k for k in plan.quantize if k not in KINDS]:
        raise RequestError(f"unknown weight kinds {unknown}; known: {', '.join(KINDS)}")
    engines = {}
    for kind in plan.quantize:
        log(f"loading the {kind} target")
        engines[kind] = build_engine(msgspec.structs.replace(
            config, models=msgspec.structs.replace(config.models, quantize=kind)), progress=log, drafters=plan.modes)
        log(f"{kind}: passes padded to {engines[kind].low_width}, edits folded: {engines[kind].folds}")
    result = weights_bench(engines, cases, plan.modes[0], plan.max_tokens, log)
    first = engines[plan.quantize[0]]
    result["settings"] = {**_settings(first, plan), "dtypes": {k: str(e.target.dtype) for k, e in engines.items()},
                          "low_widths": {k: e.low_width for k, e in engines.items()},
                          "folds": {k: e.folds for k, e in engines.items()}}
    return result


def _layerskip(config: Config, plan: EngineBench, cases: list, log: Callable[[str], None]) -> dict:
    """Search layerskip's layer sets and keep the fastest exact one for this target and machine,
    where the daemon's engine.layerskip_layers = "auto" finds it."""
    from specd.bench.modes import layerskip_search
    from specd.daemon.runtime import build_engine, layerskip_key
    from specd.decoding.layerskip import parse as parse_layers
    from specd.models.measured import keep

    engine = build_engine(config, progress=log)
    result = layerskip_search(engine, cases, plan.max_tokens, log)
    if result["chosen"] is not None:
        chosen = result["layerskip"][result["chosen"]]
        keep(config.cache_dir(), "layerskip", layerskip_key(engine.target),
             {"layers": list(parse_layers(chosen["layers"], result["layers"])), "name": result["chosen"],
              "tokens_per_s": chosen["tokens_per_s"], "acceptance": chosen["acceptance"]})
        log(f"kept layerskip's set {result['chosen']!r} ({chosen['layers']}) for this target on this machine")
    result["settings"] = _settings(engine, plan)
    return result


def profile_kinds(kinds: list[str]) -> list[str]:
    """The weight kinds to profile, `auto` (the config's default) made the kind a start on this
    CPU would pick; an unknown one refused, naming the known."""
    import torch

    from specd.decoding.request import RequestError
    from specd.models.devices import pick_quantize
    from specd.models.quantize import KINDS

    chosen = [pick_quantize(k, torch.device("cpu")) for k in kinds]
    if unknown := [k for k in chosen if k not in KINDS]:
        raise RequestError(f"unknown weight kinds {unknown}; known: auto, {', '.join(KINDS)}")
    return chosen


def run_profile(config: Config, kinds: list[str], log: Callable[[str], None]) -> dict:
    """`specd bench --profile`: each weight kind's target (and the draft, once) profiled by part,
    beside its floor; one bandwidth measured for all, in the same run."""
    import torch

    from specd.daemon.runtime import load_models
    from specd.decoding.profile import bandwidth_gbs, profile_model
    from specd.models.cpu import cpu_flags
    from specd.models.hugepages import in_huge_pages
    from specd.models.load import use_threads

    kinds = profile_kinds(kinds)
    gbs = bandwidth_gbs(in_huge_pages([torch.ones(512 << 18)])[0])  # 512 MB, where weights would lie
    log(f"memory bandwidth: {gbs:.1f} GB/s")
    result = {"bandwidth_gbs": gbs, "cpu": cpu_flags(), "models": {}}
    e = config.engine.for_device("cpu")
    for i, kind in enumerate(kinds):
        models = msgspec.structs.replace(config.models, quantize=kind, draft=config.models.draft if i == 0 else "none")
        target, draft = load_models(msgspec.structs.replace(config, models=models), progress=log,
                                    drafters=("draft",))   # profiled once, beside the first target
        use_threads(target.weights)
        pad = target.tokenizer.pad_token_id or 0
        for role, loaded, capacity in (("target", target, e.capacity), ("draft", draft, e.draft_capacity)):
            if loaded is not None:
                log(f"profiling the {role} ({loaded.weights} weights)")
                name = f"{role} ({loaded.weights}, {str(loaded.dtype).removeprefix('torch.')})"
                result["models"][name] = profile_model(loaded.model, len(loaded.tokenizer), pad,
                                                       max(capacity, 1100), gbs)
        del target, draft
    return result


def _settings(engine, plan: EngineBench) -> dict:
    return {"target": str(engine.target.spec), "draft": str(engine.draft.spec) if engine.draft else None,
            "device": str(engine.target.device), "dtype": str(engine.target.dtype),
            "max_tokens": plan.max_tokens, "cases": str(plan.cases), "width": engine.width,
            "min_probability": engine.settings.min_probability,
            "min_first_probability": engine.settings.min_first_probability}
