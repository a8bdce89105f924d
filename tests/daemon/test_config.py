"""daemon/config.py: the `[trigger]` section (and engine.min_probability) read, checked, and printed back."""

from __future__ import annotations

import pytest

from specd.daemon.config import ConfigError, Trigger, load_config, render
from tests.homes import config_file


def test_the_trigger_defaults_complete_everywhere_at_once(tmp_path):
    trigger = load_config(config_file(tmp_path, "")).trigger
    assert trigger == Trigger(auto=True, delay_ms=0, languages={}, max_line_suffix=-1)


def test_a_trigger_section_is_read(tmp_path):
    path = config_file(tmp_path, '[trigger]\nauto = false\ndelay_ms = 250\nmax_line_suffix = 8\n'
                                 'languages = { markdown = false, "*" = true }\n')
    assert load_config(path).trigger == Trigger(False, 250, {"markdown": False, "*": True}, 8)


def test_a_languages_subtable_is_read_too(tmp_path):
    path = config_file(tmp_path, "[trigger.languages]\nmarkdown = false\nplaintext = false\n")
    assert load_config(path).trigger.languages == {"markdown": False, "plaintext": False}


@pytest.mark.parametrize("line, said", [
    ("delay_ms = -1", "trigger.delay_ms must be 0..10000"),
    ("delay_ms = 60000", "trigger.delay_ms must be 0..10000"),
    ("delay_ms = 0.5", "$.trigger.delay_ms"),
    ("max_line_suffix = -2", "trigger.max_line_suffix must be -1"),
    ('auto = "yes"', "$.trigger.auto"),
    ('languages = ["markdown"]', "$.trigger.languages"),
    ('languages = { markdown = "off" }', "$.trigger.languages"),
    ('languages = { "" = false }', "an empty language id"),
    ("delay = 100", "delay"),
])
def test_a_bad_trigger_value_is_refused_naming_it(tmp_path, line, said):
    with pytest.raises(ConfigError) as error:
        load_config(config_file(tmp_path, f"[trigger]\n{line}\n"))
    assert said in str(error.value) and str(tmp_path) in str(error.value)


def test_render_prints_the_trigger_section_as_toml_that_reads_back(tmp_path):
    path = config_file(tmp_path, '[trigger]\ndelay_ms = 100\nlanguages = { markdown = false, "c++" = true }\n')
    config = load_config(path)
    text = render(config)
    assert '[trigger]\nauto = true\ndelay_ms = 100\nlanguages = {"markdown" = false, "c++" = true}\n' in text
    assert load_config(config_file(tmp_path, text)) == config


@pytest.mark.parametrize("key", ["min_probability", "min_first_probability"])
@pytest.mark.parametrize("value", ["-0.1", "1.0", '"high"'])
def test_a_bad_least_probability_is_refused_naming_it(tmp_path, key, value):
    with pytest.raises(ConfigError) as error:
        load_config(config_file(tmp_path, f"[engine]\n{key} = {value}\n"))
    assert key in str(error.value)


def test_a_least_probability_is_read(tmp_path):
    assert load_config(config_file(tmp_path, "[engine]\nmin_probability = 0.6\n")).engine.min_probability == 0.6
    engine = load_config(config_file(tmp_path, "[engine]\nmin_first_probability = 0.3\n")).engine
    assert engine.min_first_probability == 0.3
