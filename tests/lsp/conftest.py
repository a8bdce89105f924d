"""A world for `specd lsp` and the daemon it starts: tiny models, every folder temporary."""

from __future__ import annotations

import pytest

from tests.homes import Home, make_home


@pytest.fixture
def specd_env(tmp_path, tiny_target, tiny_draft, monkeypatch) -> Home:
    """This process's environment points there too, so the test finds that daemon's files."""
    home = make_home(tmp_path, tiny_target, tiny_draft)
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    yield home
    home.specd("stop")
