"""The [backend] section: what a server backend needs, refused clearly where it is wrong, and the
FIM family told from the model's name."""

from __future__ import annotations

import pytest

from specd.daemon.config import ConfigError, load_config
from specd.decoding.prompt import TEMPLATES, Budget
from specd.decoding.textprompt import fim_text, guess_family, prefix_window, suffix_window
from tests.homes import config_file


def test_the_default_backend_is_the_local_engine(tmp_path):
    config = load_config(tmp_path / "absent.toml")
    assert config.backend.kind == "local"
    assert (config.backend.timeout_s, config.backend.max_in_flight, config.backend.family) == (10.0, 1, "auto")


def test_three_lines_name_a_server(tmp_path):
    config = load_config(config_file(tmp_path, '[backend]\nkind = "server"\nurl = "https://gpu.example.org:8000"\n'
                                               'model = "Qwen/Qwen2.5-Coder-7B"\n'))
    assert (config.backend.kind, config.backend.url) == ("server", "https://gpu.example.org:8000")


@pytest.mark.parametrize("lines, says", [
    ('kind = "server"\nmodel = "qwen2.5-coder-1.5b"', "backend.url is required"),
    ('kind = "server"\nurl = "localhost:8080"\nmodel = "qwen2.5-coder-1.5b"', "backend.url: 'localhost:8080' is not"),
    ('kind = "server"\nurl = "http://h:1"', "backend.model is required"),
    ('kind = "server"\nurl = "http://h:1"\nmodel = "mistral-7b"', "cannot be told from the model name 'mistral-7b'"),
    ('kind = "server"\nurl = "http://h:1"\nmodel = "m"\nfamily = "gpt"', "backend.family must be auto or one of"),
    ('api_key_env = "sk-abc123"', "the NAME of an environment variable"),
    ('timeout_s = 0', "backend.timeout_s must be more than 0"),
    ('max_in_flight = 0', "backend.max_in_flight must be 1..64"),
    ('kind = "cluster"', "$.backend.kind"),
    ('urls = "http://h:1"', "unknown field `urls` - at `$.backend`"),
])
def test_a_bad_backend_is_refused_naming_the_key(tmp_path, lines, says):
    with pytest.raises(ConfigError) as error:
        load_config(config_file(tmp_path, f"[backend]\n{lines}\n"))
    assert says in str(error.value), str(error.value)


@pytest.mark.parametrize("model, family", [
    ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder"), ("Qwen/Qwen2.5-Coder-7B-Instruct", "qwen2.5-coder"),
    ("bigcode/starcoder2-3b", "starcoder2"), ("deepseek-ai/deepseek-coder-1.3b-base", "deepseek-coder"),
    ("codellama/CodeLlama-7b-hf", "codellama"), ("llama-3-8b", None), ("qwen2.5-7b-instruct", None),
])
def test_the_family_is_told_from_the_name(model, family):
    assert guess_family(model) == family


def test_the_text_prompt_is_the_templates_least_changing_first():
    t = TEMPLATES["qwen2.5-coder"]
    text = fim_text(t, Budget(100, 100, 100), "def f(x):\n    return ", "\nprint(f(2))\n", (("util.py", "X = 1"),))
    assert text == ("<|file_sep|>util.py\nX = 1\n<|fim_prefix|>def f(x):\n    return <|fim_suffix|>\nprint(f(2))\n"
                    "<|fim_middle|>")


def test_the_prefix_window_moves_by_whole_steps_of_lines():
    prefix = "".join(f"line {i}\n" for i in range(100))
    window = prefix_window(prefix, 300)
    assert window.startswith("line 64\n") and len(window) <= 300
    assert prefix_window(prefix + "more typed", 300).startswith("line 64\n"), "a keystroke keeps the window's start"
    assert prefix_window("x" * 50, 10) == "x" * 10, "one line over the budget: its tail"
    assert suffix_window("ab\ncd\nef\n", 7) == "ab\ncd\n" and suffix_window("abcdef", 3) == "abc"
