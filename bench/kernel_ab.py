"""Two builds of specd's kernels side by side, on a model's own quantized blocks.

A pass's speed on a busy 2-core VM moves by 20% from one minute to the next, more than a kernel
change does; so this times both libraries in one process, one thread each (no pool to spin),
alternating call by call on every matrix of one layer, and keeps each one's best time. It also
checks that both give the same bits, which every kernel change must keep. Each library gets the
blocks in the layout it asks for (`specd_layout`, where it has one), laid out as the loader would.

    cp decoding/_kernels*.so /tmp/before.so      # then change the kernels and rebuild
    .venv/bin/python -m specd.bench.kernel_ab /tmp/before.so decoding/_kernels*.so --widths 1,2,4,8,16

SPECD_KERNELS (avx2, avxvnni, portable) runs both on a lower body than the CPU's best, as the engine does.

Blocks come from the configured target's converted folder (`specd-gguf-blocks.safetensors`), or
from --blocks FILE.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from specd.decoding import qkernel
from specd.models.groups import KEPT as KINDS  # GGML type numbers by name


@dataclass(frozen=True)
class Matrix:
    name: str
    kind: int                 # GGML type number (qkernel.Q4_K, ...)
    blocks: torch.Tensor      # [N, row bytes] uint8

    @property
    def k(self) -> int:
        values, size = qkernel.BLOCK[self.kind]
        return self.blocks.shape[1] // size * values


def load_library(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.specd_matmul.argtypes = [i, p, i, i, p, i, p, p, p]
    lib.specd_act_bytes.argtypes = [i, i]
    lib.specd_threads.argtypes = [i]
    lib.specd_threads(1)
    lib.specd_kernel_level.argtypes = [i]
    qkernel._force_from_environment(lib)  # $SPECD_KERNELS: both libraries run the same lower body
    if hasattr(lib, "specd_layout"):
        lib.specd_layout.argtypes = [i]
        lib.specd_relayout.argtypes = [i, i, p, ctypes.c_size_t]
    return lib


def laid_out(lib: ctypes.CDLL, m: Matrix) -> Matrix:
    """`m` as `lib`'s loader would hold it: its own layout of the blocks, if it has one."""
    if not hasattr(lib, "specd_layout") or (kind := lib.specd_layout(m.kind)) == m.kind:
        return m
    blocks = m.blocks.clone()
    rc = lib.specd_relayout(m.kind, kind, blocks.data_ptr(), blocks.numel() // qkernel.BLOCK[m.kind][1])
    assert rc == 0, f"{m.name}: the library refused its own layout"
    return Matrix(m.name, kind, blocks)


def layer_matrices(blocks_file: Path, layer: int) -> list[Matrix]:
    from safetensors import safe_open

    with safe_open(str(blocks_file), "pt") as f:
        types = f.metadata() or {}
        prefix = f"model.layers.{layer}."
        return [Matrix(name, KINDS[types[name]], f.get_tensor(name))
                for name in f.keys() if name.startswith(prefix) and types.get(name) in KINDS]


def one_call(lib: ctypes.CDLL, m: Matrix, x: torch.Tensor, scratch: torch.Tensor) -> tuple[float, torch.Tensor]:
    y = torch.empty(x.shape[0], m.blocks.shape[0])
    start = time.perf_counter()
    rc = lib.specd_matmul(m.kind, m.blocks.data_ptr(), m.blocks.shape[0], m.k, x.data_ptr(), x.shape[0],
                          y.data_ptr(), scratch.data_ptr(), None)
    took = time.perf_counter() - start
    assert rc == 0, f"{m.name}: the kernel refused it"
    return took, y


def compare(libs: dict[str, ctypes.CDLL], matrices: list[Matrix], widths: list[int],
            reps: int) -> dict[int, dict[str, float]]:
    """Per width, each library's ms for all `matrices` once (the best of `reps` per matrix). Raises
    if two libraries' outputs differ in a single bit."""
    torch.manual_seed(0)
    result = {}
    for width in widths:
        total = dict.fromkeys(libs, 0.0)
        for m in matrices:
            x = torch.randn(width, m.k)
            scratch = torch.empty(width * max(lib.specd_act_bytes(m.kind, m.k) for lib in libs.values()),
                                  dtype=torch.uint8)
            own = {name: laid_out(lib, m) for name, lib in libs.items()}
            best, out = dict.fromkeys(libs, float("inf")), {}
            for _ in range(reps):
                for name, lib in libs.items():
                    took, out[name] = one_call(lib, own[name], x, scratch)
                    best[name] = min(best[name], took)
            check_same_bits(m.name, width, out)
            for name in libs:
                total[name] += best[name] * 1e3
        result[width] = total
    return result


def check_same_bits(matrix: str, width: int, outputs: dict[str, torch.Tensor]) -> None:
    (first, y0), *others = outputs.items()
    for name, y in others:
        if not torch.equal(y0, y):
            raise AssertionError(f"{matrix} at width {width}: {name} differs from {first}")


def configured_blocks() -> Path:
    from specd.daemon.config import load_config
    from specd.models.groups import GROUPS
    from specd.models.resolve import resolve
    from specd.models.specs import parse_spec

    config = load_config()
    return resolve(parse_spec(config.models.target), config.cache_dir()) / GROUPS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specd.bench.kernel_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--blocks", type=Path,
                        help="a specd-gguf-blocks.safetensors (default: the configured target's)")
    parser.add_argument("--layer", type=int, default=5)
    parser.add_argument("--widths", default="1,2,4,8,16")
    parser.add_argument("--reps", type=int, default=12)
    args = parser.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",")]
    blocks = args.blocks or configured_blocks()
    matrices = layer_matrices(blocks, args.layer)
    if not matrices:
        print(f"no quantized blocks of layer {args.layer} in {blocks}", file=sys.stderr)
        return 2
    libs = {"before": load_library(args.before), "after": load_library(args.after)}
    body = qkernel.LEVELS[libs["after"].specd_kernel_level(-1)]
    print(f"{len(matrices)} matrices of layer {args.layer} ({blocks}); one thread, {body} kernels; "
          "ms for all of them once")
    for width, ms in compare(libs, matrices, widths, args.reps).items():
        ratio = ms["after"] / ms["before"]
        print(f"width {width:2d}: before {ms['before']:7.2f}  after {ms['after']:7.2f}  after/before {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
