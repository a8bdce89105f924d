"""The engine's settings: what the config's [engine] section decodes into, as it is.

One frozen Struct, so a setting is named, typed and defaulted once: the daemon's config file
(daemon/config.py checks the ranges and names the key) and callers that build an engine in code
(tests, bench/) fill the same fields. Torch-free: the config is read where no engine loads.
"""

from __future__ import annotations

import msgspec

from specd.decoding.prompt import Budget

# The suffix budget by device (cpu, gpu), for suffix_tokens = -1: a keystroke recomputes every
# prompt token after the cursor, and on a CPU with int4 weights a pass of 33 rows costs several
# times one of 4. `specd bench --suffix-budgets 0,32,64,128,256` on 40 held-out cases found the
# first line right 12, 12, 13, 13, 13 times: the suffix buys little on the CPU, where each
# keystroke pays for it.
SUFFIX_DEFAULT = (0, 256)
# The glance budget by device (cpu, gpu), for glance_tokens = -1: on 2 cores a prompt costs ~12 ms
# a token, so the first answer in a place not yet read waits ~18 s for 1536 tokens of prefix and
# ~6 s for a glance of 512 (README "A glance first"); a GPU reads the whole prompt in well under a
# second, and never glances.
GLANCE_DEFAULT = (512, 0)
# Prompt tokens per prefill pass by device (cpu, gpu), for prefill_chunk = -1. On 2 cores a prompt
# token costs the same in chunks of 16 to 128 (~12 ms natively, ~16 as AVX2: the kernels take 8
# rows at a time, and a pass reads the weights once whatever its width), so the CPU's chunk is the
# one a keystroke can cut short and a read between keystrokes still finishes (~0.4 s); a GPU's
# passes cost about the same at 32 rows as at 128, and fewer of them cost less.
PREFILL_DEFAULT = (32, 128)
DRAFT_CHUNK = 512  # prefill tokens per draft pass: the draft reads several times faster than the target,
                   # so a chunk of 512 takes about what a target chunk of 128 does (cancel checks stay as often)


class EngineSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    width: int = 16                  # the widest target pass; how many drafted tokens a pass verifies is chosen
                                     # by the pass costs measured on this machine (decoding/policy.py)
    prefill_chunk: int = -1          # tokens per prefill pass (the cancel granularity); -1: PREFILL_DEFAULT
    prefix_tokens: int = 1536        # llama.cpp's infill takes as much; chosen by `bench/engine_sweep.sh` (README)
    suffix_tokens: int = -1          # -1: the measured default for the device (SUFFIX_DEFAULT)
    extra_tokens: int = 0            # other open files in the prompt (always used by lookup)
    glance_tokens: int = -1          # a request whose prompt has more tokens not yet cached is answered from a
                                     # prefix window of this many (a glance) while the whole prompt is read on
                                     # the idle lane; 0: never; -1: the device's default (GLANCE_DEFAULT)
    max_tokens_limit: int = 256      # the most a request may ask for; sizes the caches
    draft_context_tokens: int = 384  # the draft model reads this much of the prefix (and a quarter as much suffix)
    fim_template: str = "auto"
    lookup_ngram: int = 8
    hybrid_min_match: int = 2        # hybrid: prompt lookup when it matches this many tokens, else the draft
    narrow_passes: bool = True       # pad a pass only to the smallest width measured to give the same
                                     # bits as `width` (at start-up: decoding/widths.py)
    fold_prompt: bool = True         # compute up to `prefill_chunk` uncached prompt tokens (a keystroke's edit)
                                     # in the first verify pass, where the probe finds the same bits
    draft_confidence: float = 0.0    # the draft also stops once the product of its tokens' probabilities is
                                     # less (0: where the pass costs say it stops paying, alone)
    min_probability: float = 0.8     # once a completion shows text, end it before a token the target gives less
                                     # (0: never); chosen by `bench/engine_sweep.sh` (README)
    min_first_probability: float = 0.15  # before any text shows, a token the target gives less ends the completion
                                     # empty: nothing shown rather than a guess (0: never; README)
    cache_memory_mb: int = 768       # KV caches of recent documents, least recently used out (15 of the
                                     # built-in target's on a CPU, ~50 MB each in halves: within 2.5 GB)
    token_healing: bool = True       # a prefix ending inside what may be one token leaves it out of the prompt,
                                     # and the completion spells it first (decoding/healing.py; README)
    pace_drafts: bool = True         # rest the draft model while it costs more than it saves
    layerskip_layers: str = "auto"   # the target's layers the layerskip drafter runs, as ranges ("0-9,14-27");
                                     # auto: the set `specd bench --layerskip` chose here, else a default

    def for_device(self, device_type: str) -> EngineSettings:
        """These settings with the device's defaults filled in (those set to -1)."""
        gpu = device_type == "cuda"
        pick = lambda value, default: default[gpu] if value < 0 else value  # noqa: E731
        return msgspec.structs.replace(
            self, suffix_tokens=pick(self.suffix_tokens, SUFFIX_DEFAULT),
            glance_tokens=pick(self.glance_tokens, GLANCE_DEFAULT),
            prefill_chunk=pick(self.prefill_chunk, PREFILL_DEFAULT))

    @property
    def budget(self) -> Budget:
        assert self.suffix_tokens >= 0, "the device's suffix default is filled in (for_device) first"
        return Budget(prefix=self.prefix_tokens, suffix=self.suffix_tokens, extra=self.extra_tokens)

    @property
    def capacity(self) -> int:
        b = self.budget
        return b.prefix + b.suffix + b.extra + 16 + self.max_tokens_limit + self.width

    @property
    def draft_capacity(self) -> int:
        """The draft reads a shorter window (decoding/draft_model.py), and its static cache is
        sized to it: every draft step attends over the whole cache."""
        return window_capacity(self.draft_context_tokens) + self.max_tokens_limit + self.width


def window_capacity(context_tokens: int) -> int:
    """The most tokens the draft model's window holds (`ModelDrafter.window`): the prefix's tail,
    the suffix's head (a quarter as long), and 3 marks."""
    return context_tokens + context_tokens // 4 + 3
