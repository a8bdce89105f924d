"""What this CPU is, in the terms that decide which kernels run: torch's vector capability and the
instruction-set flags the figures in the README are given with (/proc/cpuinfo on Linux)."""

from __future__ import annotations

from pathlib import Path

FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni", "avx_vnni",
         "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags() -> dict:
    """{"model": ..., "torch": torch's capability, "kernels": which of specd's kernels run
    ("avx512", "avxvnni", "avx2", "portable"; "none" where not built), "flags": those of FLAGS the
    CPU has, "cores": n}."""
    import os

    import torch

    from specd.decoding import qkernel

    present = all_flags()
    return {"model": _field("model name"), "torch": torch.backends.cpu.get_cpu_capability(),
            "kernels": qkernel.level() if qkernel.available() else "none",
            "flags": [f for f in FLAGS if f in present], "cores": os.cpu_count()}


def all_flags() -> set[str]:
    """Every instruction-set flag /proc/cpuinfo gives for the first CPU (none off Linux)."""
    return set(_field("flags").split())


def describe(info: dict) -> str:
    """One line: `AMD EPYC, 2 cores: avx2 fma f16c (torch: AVX2; specd's kernels: avx2)`."""
    return (f"{info['model'] or 'CPU'}, {info['cores']} cores: {' '.join(info['flags']) or 'no AVX2'} "
            f"(torch: {info['torch']}; specd's kernels: {info.get('kernels', 'none')})")


def _field(name: str) -> str:
    """The first value of `name` in /proc/cpuinfo, or "" where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith(name) and ":" in line:
            return line.split(":", 1)[1].strip()
    return ""
