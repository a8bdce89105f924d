"""The one thing pyproject.toml cannot say: specd's CPU kernels (decoding/kernels/*.c), built into
a plain shared library that decoding/qkernel.py loads with ctypes. Built for any x86-64 or other
CPU (no -march): the AVX2 code is chosen at run time. Optional: where no C compiler is found the
install goes on, and the engine uses torch's own kernels instead."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "specd.decoding._kernels",
    sources=[f"decoding/kernels/{name}.c"
             for name in ("attend", "attend_avx2", "dot", "dot_avx2", "dot_avxvnni", "dot_avx512", "layer", "layout",
                          "matmul", "pool")],
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-math-errno", "-pthread"],
    extra_link_args=["-pthread"],
    libraries=["m"],
    optional=True,
)])
