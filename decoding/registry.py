"""The drafters by name: the one list that the engine, the protocol, the config and the command
line take their names from, and the one default. Torch-free, so clients import it cheaply."""

from __future__ import annotations

from typing import Literal, get_args

DrafterName = Literal["none", "lookup", "draft", "hybrid"]
DRAFTERS: tuple[str, ...] = get_args(DrafterName)
MODEL_DRAFTERS = frozenset({"draft", "hybrid"})  # these need the draft model loaded

# lookup: hybrid decodes little faster and reads the prompt a second time with the draft model, so
# lookup is faster end to end on the CPU (measured: README, "Benchmarks").
DEFAULT_DRAFTER: DrafterName = "lookup"
