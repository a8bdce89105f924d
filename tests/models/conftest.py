"""Fixtures of the model tests: the tiny target as a GGUF file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny import write_gguf


@pytest.fixture(scope="package")
def tiny_gguf(tiny_target, tmp_path_factory) -> Path:
    return write_gguf(tiny_target, tmp_path_factory.mktemp("gguf") / "tiny.gguf")
