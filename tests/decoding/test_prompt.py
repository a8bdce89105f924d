"""FIM prompts: templates, the budget that keeps text near the cursor, windows that stay put."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from specd.decoding.prompt import (
    LINE_STEP,
    MIDDLE_STEP,
    TEMPLATES,
    Budget,
    PromptBuilder,
    PromptError,
    detect_template,
    middle_start,
)


@pytest.fixture(scope="module")
def tokenizer(tiny_target):
    return AutoTokenizer.from_pretrained(tiny_target)


def builder(tokenizer, **budget) -> PromptBuilder:
    return PromptBuilder(tokenizer, detect_template(tokenizer), Budget(**budget))


def test_qwen_template_is_detected_and_ordered_prefix_suffix_middle(tokenizer):
    b = builder(tokenizer)
    assert b.template.family == "qwen2.5-coder"
    text = tokenizer.decode(b.build("def f():\n    ", "").ids)
    assert text == "<|fim_prefix|>def f():\n    <|fim_suffix|><|fim_middle|>", "no suffix: it ends at the cursor"
    text = tokenizer.decode(b.build("def f():\n    ", "\nprint(f())\n").ids)
    assert text == "<|fim_prefix|><|fim_suffix|>\nprint(f())\n<|fim_middle|>def f():\n    ", \
        "with a suffix, the text from the anchor (here the first line) to the cursor starts the middle"
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


def test_typing_changes_only_the_middle_until_the_anchor_moves(tokenizer):
    """With a suffix, keystrokes (new lines too) leave every token up to the middle mark as it was,
    so the suffix is read once per MIDDLE_STEP lines; prefix + middle + suffix is the document."""
    b = builder(tokenizer, prefix=400, suffix=60)
    head = "".join(f"value_{i} = compute({i})\n" for i in range(2 * MIDDLE_STEP))
    suffix = "\nprint(total)\n" + "".join(f"check_{i}()\n" for i in range(40))
    typed = "total = 0\nfor v in values:\n    total += v"
    prompts = [b.build(head + typed[:n], suffix) for n in range(len(typed) + 1)]
    mid = prompts[0].ids.index(tokenizer.convert_tokens_to_ids("<|fim_middle|>"))
    assert all(p.ids[:mid + 1] == prompts[0].ids[:mid + 1] for p in prompts), "the suffix was read again"
    last = prompts[-1]
    assert tokenizer.decode(last.middle_ids) == typed, "the anchor is the aligned line above the cursor"
    assert tokenizer.decode(last.prefix_ids + last.middle_ids).endswith(head[-200:] + typed)
    assert tokenizer.decode(last.suffix_ids).startswith("\nprint(total)\n") and len(last.suffix_ids) <= 60
    moved = b.build(head + "x = 1\n" * MIDDLE_STEP + "y", suffix)
    assert tokenizer.decode(moved.middle_ids) == "y", "16 lines later the anchor moved to the cursor's line"
    assert len(moved.prefix_ids) + len(moved.middle_ids) <= 400


def test_the_middle_start_keeps_within_its_allowance():
    lines = "".join(f"line {i}\n" for i in range(MIDDLE_STEP + 5))
    assert middle_start(lines + "x", lambda text: True) == lines.index(f"line {MIDDLE_STEP}\n")
    assert middle_start("x", lambda text: True) == 0
    short = middle_start(lines + "x", lambda text: len(text) <= 16)
    assert (lines + "x")[short:] == "line 20\nx", "the first line start from which the rest fits"
    assert middle_start(lines + "y" * 99, lambda text: len(text) <= 16) == len(lines), "a long line: its own start"
