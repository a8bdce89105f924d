"""The in-process backend: the torch engine that daemon/runtime.py builds, as a `Backend`.

The only daemon module, with runtime.py, that imports the engine: a daemon whose backend is a
server (daemon/remote.py) never loads torch.
"""

from __future__ import annotations

from collections.abc import Callable

from specd.daemon.backend import Described
from specd.daemon.config import Config
from specd.decoding.engine import Engine
from specd.decoding.request import Completion, CompletionRequest


class LocalBackend:
    def __init__(self, engine: Engine, config: Config):
        self.engine, self.config = engine, config
        self._passes = 0
        engine.on_forward(self._tick)   # a pre-hook on each model: cancels land within one pass

    def _tick(self, module, args) -> None:
        self._passes += 1

    def complete(self, request: CompletionRequest, cancelled: Callable[[], bool]) -> Completion:
        return self.engine.complete(request, cancelled)

    def passes(self) -> int:
        return self._passes

    def describe(self) -> Described:
        e = self.engine
        return Described(target=str(e.target.spec), draft=str(e.draft.spec) if e.draft else self._no_draft(),
                         device=str(e.target.device), dtype=str(e.target.dtype).removeprefix("torch."),
                         device_reason=e.target.device_reason, cache_mb=e.cache_bytes() / 2**20,
                         cache_documents=e.cached_documents(), curve=e.curve)

    def _no_draft(self) -> str:
        """Why no draft model is resident: none asked for, or the default drafter needs none."""
        if self.config.models.draft != "auto":
            return "none"
        return f"none (models.draft auto: completion.drafter {self.config.completion.drafter} needs none)"

    def close(self) -> None:
        pass   # the models go with the process
