"""FIM prompts: templates, the budget that keeps text near the cursor, windows that stay put."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from specd.decoding.prompt import LINE_STEP, TEMPLATES, Budget, PromptBuilder, PromptError, detect_template


@pytest.fixture(scope="module")
def tokenizer(tiny_target):
    return AutoTokenizer.from_pretrained(tiny_target)


def builder(tokenizer, **budget) -> PromptBuilder:
    return PromptBuilder(tokenizer, detect_template(tokenizer), Budget(**budget))


def test_qwen_template_is_detected_and_ordered_prefix_suffix_middle(tokenizer):
    b = builder(tokenizer)
    assert b.template.family == "qwen2.5-coder"
    text = tokenizer.decode(b.build("def f():\n    ", "\nprint(f())\n").ids)
    assert text == "<|fim_prefix|>def f():\n    <|fim_suffix|>\nprint(f())\n<|fim_middle|>"
    assert tokenizer.convert_tokens_to_ids("<|fim_pad|>") in b.stop_ids
    assert tokenizer.eos_token_id in b.stop_ids


def test_unknown_template_and_tokenizer_without_fim_tokens_are_refused(tokenizer):
    with pytest.raises(PromptError, match="unknown FIM template"):
        detect_template(tokenizer, "gpt9")
    assert detect_template(tokenizer, "starcoder2") is TEMPLATES["starcoder2"]


def test_budget_drops_the_far_prefix_and_far_suffix_first(tokenizer):
    prefix = "".join(f"line_{i} = {i}\n" for i in range(400))
    suffix = "".join(f"after_{i} = {i}\n" for i in range(400))
    p = builder(tokenizer, prefix=200, suffix=40).build(prefix, suffix)
    kept_prefix = tokenizer.decode(p.prefix_ids)
    assert len(p.prefix_ids) <= 200 and kept_prefix.endswith("line_399 = 399\n")
    assert "line_0 =" not in kept_prefix
    kept_suffix = tokenizer.decode(p.suffix_ids)
    assert len(p.suffix_ids) <= 40 and kept_suffix.startswith("after_0 = 0\n")
    assert kept_suffix.endswith("\n"), "the suffix is cut at whole lines"


def test_prefix_window_stays_put_while_typing(tokenizer):
    """Keystrokes at the cursor change only the end of the prompt, so the KV cache is reused."""
    b = builder(tokenizer, prefix=300, suffix=0)
    base = "".join(f"value_{i} = compute({i})\n" for i in range(200))
    typed = "result = value_1"
    prompts = [b.build(base + typed[:n], "").ids for n in range(1, len(typed) + 1)]
    starts = {tuple(p[:50]) for p in prompts}
    assert len(starts) == 1, "the window moved while typing on one line"
    first_line = tokenizer.decode(prompts[0][1:40]).split("\n")[0]
    number = int(first_line.split("_")[1].split(" ")[0])
    assert number % LINE_STEP == 0, "windows start at aligned lines"


def test_extra_context_comes_first_and_within_its_budget(tokenizer):
    b = builder(tokenizer, prefix=100, suffix=20, extra=60)
    p = b.build("x = 1\n", "", extras=(("a.py", "import os\n"), ("b.py", "y = 2\n" * 100)))
    text = tokenizer.decode(p.ids)
    assert text.startswith("<|file_sep|>a.py\nimport os\n")
    assert "b.py" not in text, "a file over the extra budget is left out"
    assert len(p.extra_ids) == 2, "every extra text still serves lookup"
