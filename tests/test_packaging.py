"""What `pip install` of a built wheel gets (README, Install): the wheel `python -m build` makes
from the sdist carries specd's CPU kernels, so the sdist carries everything they compile from."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_built_from_the_sdist_carries_the_kernels(tmp_path):
    source = tmp_path / "checkout"   # a copy: the build leaves its egg-info and build/ behind
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".tools", ".git", "node_modules", "build", "dist", "*.egg-info", "__pycache__", "*.so",
        ".hypothesis", ".pytest_cache", "bench-out"))
    # no isolation: this venv's setuptools, nothing fetched
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"),
                           str(source)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [sdist] = (tmp_path / "dist").glob("specd-*.tar.gz")
    kernels = sorted(p.name for p in (ROOT / "decoding" / "kernels").iterdir() if p.suffix in (".c", ".h"))
    with tarfile.open(sdist) as tar:
        packed = sorted(Path(name).name for name in tar.getnames() if "/decoding/kernels/" in name)
    assert packed == kernels
    [wheel] = (tmp_path / "dist").glob("specd-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert any(name.startswith("specd/decoding/_kernels") and name.endswith(".so") for name in z.namelist()), \
            f"no kernels in {wheel.name}:\n{done.stdout[-3000:]}"
