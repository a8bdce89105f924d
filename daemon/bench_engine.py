"""`specd bench`: every mode on the same cases and models in one process (decoding/bench.py runs
them); here the cases are read, the modes checked before any model loads, and the settings noted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import msgspec

from specd.daemon.config import Config


def read_cases(path: Path, limit: int | None) -> list:
    from specd.decoding.bench import Case
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


def run_bench(config: Config, plan: EngineBench, log: Callable[[str], None]) -> dict:
    """The results (decoding/bench.py's dict) and the settings they were measured with."""
    from specd.daemon.runtime import build_engine
    from specd.decoding.bench import ANCHORS, bench, suffix_sweep
    from specd.decoding.registry import DRAFTERS
    from specd.decoding.request import RequestError

    cases = read_cases(plan.cases, plan.limit)
    modes = plan.modes + (list(ANCHORS) if plan.anchors else [])
    known = set(DRAFTERS) | {"none@1"} | set(ANCHORS)
    if unknown := [m for m in modes if m not in known]:
        raise RequestError(f"unknown modes {unknown}; known: {', '.join(sorted(known))}")
    engine = build_engine(config)
    if plan.suffix_budgets:
        result = suffix_sweep(engine, cases, plan.suffix_budgets, plan.max_tokens, log)
    else:
        result = bench(engine, cases, modes, plan.max_tokens, log)
    result["settings"] = {"target": str(engine.target.spec), "draft": str(engine.draft.spec) if engine.draft else None,
                          "device": str(engine.target.device), "dtype": str(engine.target.dtype),
                          "max_tokens": plan.max_tokens, "cases": str(plan.cases), "width": engine.settings.width}
    return result
