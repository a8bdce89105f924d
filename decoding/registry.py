"""The drafters by name: the one list that the engine, the protocol, the config and the command
line take their names from, and the one default. Torch-free, so clients import it cheaply."""

from __future__ import annotations

from typing import Literal, get_args

# none: plain decoding; lookup: n-grams of the prompt and the last completion (decoding/lookup.py);
# draft: the draft model (decoding/draft_model.py); hybrid: lookup where it matches, else the draft
# (decoding/drafter.py); layerskip: a subset of the target's own layers (decoding/layerskip.py);
# heads: Medusa-style heads on the target's last hidden state, trained here (decoding/heads.py).
DrafterName = Literal["none", "lookup", "draft", "hybrid", "layerskip", "heads"]
DRAFTERS: tuple[str, ...] = get_args(DrafterName)
MODEL_DRAFTERS = frozenset({"draft", "hybrid"})  # these need the draft model loaded
SHAPED_DRAFTERS = frozenset({"layerskip"})       # these need a Llama-shaped target (decoding/lean.py)
HEAD_DRAFTERS = frozenset({"heads"})             # these need heads trained for the target (`specd heads train`),
                                                 # a Llama-shaped one, on a CPU

# lookup: hybrid decodes little faster and reads the prompt a second time with the draft model, so
# lookup is faster end to end on the CPU (measured: README, "Benchmarks").
DEFAULT_DRAFTER: DrafterName = "lookup"
