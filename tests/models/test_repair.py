"""A damaged model cache is named at load, and `specd models pull --repair` rebuilds it.

The cache is the tiny model's GGUF file converted into its folder, as the built-in pair's is; each
test damages a copy of it the way a crash, a full disk or a stray tool would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from specd.decoding.loaded import ModelError
from specd.models.integrity import MARKER, CacheDamaged, check, join, read_marker
from specd.models.load import load
from specd.models.resolve import repair, resolve
from specd.models.specs import parse_spec
from tests.homes import make_home


@pytest.fixture(scope="module")
def converted(tiny_gguf, tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("converted")
    resolve(parse_spec(str(tiny_gguf)), cache)
    return cache


@pytest.fixture
def cache(converted, tmp_path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(converted, copy)      # keeps the files' modification times
    return copy


def folder_of(cache: Path) -> Path:
    (folder,) = (cache / "models").iterdir()
    return folder


def flip_a_byte(path: Path, keep_mtime: bool = False) -> None:
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(st.st_size // 2)
        byte = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


DAMAGE = {
    "half-written weights": ("model.safetensors", lambda p: os.truncate(p, p.stat().st_size // 2), "half-written"),
    "a corrupted byte": ("model.safetensors", flip_a_byte, "does not match its recorded sha256"),
    "a missing tokenizer": ("tokenizer.json", Path.unlink, "is missing"),
    "a torn marker": (MARKER, lambda p: p.write_bytes(p.read_bytes()[:40]), "cannot be read"),
}


def test_the_marker_lists_every_file_of_the_folder(tiny_gguf, cache):
    folder = folder_of(cache)
    listed = set(read_marker(folder).files)
    assert listed == {p.name for p in folder.iterdir() if p.name != MARKER}
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= listed
    assert check(folder, thorough=True) == len(listed)


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cache_is_named_at_load_and_repair_rebuilds_it(tiny_gguf, cache, damage):
    name, harm, problem = DAMAGE[damage]
    folder = folder_of(cache)
    harm(folder / name)
    spec = parse_spec(str(tiny_gguf))
    with pytest.raises(CacheDamaged) as refused:
        load(spec, cache, "cpu")
    message = str(refused.value)
    assert f"{name} " in message and problem in message and "specd models pull --repair" in message, message
    done = repair(spec, cache, say=lambda line: None)
    assert done.startswith("rebuilt") and name in done, done
    assert load(spec, cache, "cpu").folder == folder
    assert repair(spec, cache).startswith("verified")


def test_repair_hashes_every_byte_where_the_quick_check_trusts_the_times(tiny_gguf, cache):
    folder = folder_of(cache)
    flip_a_byte(folder / "model.safetensors", keep_mtime=True)   # size and time as recorded
    check(folder)                                                # the quick check at load trusts them
    with pytest.raises(CacheDamaged, match="model.safetensors does not match"):
        check(folder, thorough=True)


def test_a_file_cached_later_joins_the_check(tiny_gguf, cache):
    folder = folder_of(cache)
    (folder / "weights.int8.safetensors").write_bytes(b"\x01" * 4096)
    join(folder, ["weights.int8.safetensors"])
    check(folder, thorough=True)
    os.truncate(folder / "weights.int8.safetensors", 100)
    with pytest.raises(CacheDamaged, match="weights.int8.safetensors has 100 bytes, expected 4,096"):
        check(folder)


def test_start_names_the_damage_and_pull_repair_mends_it(tiny_gguf, tiny_draft, cache, tmp_path):
    home = make_home(tmp_path / "home", tiny_gguf, tiny_draft)
    home.config_path.write_text(home.config_path.read_text().replace(
        "[models]\n", f'[models]\ncache_dir = "{cache}"\n').replace(f'draft = "{tiny_draft}"', 'draft = "none"'))
    try:
        intact = home.specd("models", "pull", "--repair")
        assert intact.returncode == 0 and "target: verified" in intact.stdout, intact.stdout + intact.stderr
        folder = folder_of(cache)
        os.truncate(folder / "model.safetensors", 1000)
        refused = home.specd("start")
        assert refused.returncode != 0 and "model.safetensors has 1,000 bytes" in refused.stderr, refused.stderr
        assert "specd models pull --repair" in refused.stderr
        mended = home.specd("models", "pull", "--repair")
        assert mended.returncode == 0 and "target: rebuilt" in mended.stdout, mended.stdout + mended.stderr
        started = home.specd("start")
        assert started.returncode == 0, started.stderr
    finally:
        home.specd("stop")


def test_repair_leaves_a_folder_specd_did_not_make_alone(tiny_target, tmp_path):
    with pytest.raises(ModelError, match="not a folder specd made"):
        repair(parse_spec(str(tiny_target)), tmp_path)
