"""Is there an NVIDIA GPU, and what follows: which torch build `make setup` installs, and which
device `auto` means, with the reason in words.

Standard library only: the Makefile runs this file before torch is installed
(`python models/gpu.py pip-args`), and `specd status` must not need torch to explain itself. The
facts are gathered by `probe_gpu` and `TorchCuda.read`; the decisions (`torch_plan`,
`choose_device`) are pure functions of them, which is what the tests check.

Why the Makefile asks: a pinned `torch==2.13.0` is satisfied by a CPU build wherever a package
index or a folder offers one, and pip takes it silently; then `auto` quietly means the CPU on a GPU
machine. So where nvidia-smi answers, the requirement names a CUDA build (`torch==2.13.0+cu128`),
which no CPU file satisfies.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TORCH = "2.13.0"
# torch's CUDA builds, newest first: (the CUDA version a driver must support, tag)
CUDA_BUILDS = (((13, 0), "cu130"), ((12, 8), "cu128"), ((12, 6), "cu126"))
CUDA_INDEX = "https://download.pytorch.org/whl/"


@dataclass(frozen=True)
class GpuProbe:
    """What the machine shows of NVIDIA GPUs, without torch."""
    device_nodes: tuple[str, ...] = ()       # /dev/nvidia0, ...
    smi_ok: bool = False                     # `nvidia-smi` ran and listed a GPU
    names: tuple[str, ...] = ()
    driver_cuda: tuple[int, int] | None = None  # the newest CUDA the driver supports

    @property
    def present(self) -> bool:
        return self.smi_ok or bool(self.device_nodes)

    def describe(self) -> str:
        if self.smi_ok:
            cuda = f", driver CUDA {self.driver_cuda[0]}.{self.driver_cuda[1]}" if self.driver_cuda else ""
            return f"nvidia-smi: {', '.join(self.names) or 'a GPU'}{cuda}"
        if self.device_nodes:
            return f"{', '.join(self.device_nodes)}, but nvidia-smi does not answer"
        return "no /dev/nvidia*, no nvidia-smi"


def probe_gpu(dev: Path = Path("/dev")) -> GpuProbe:
    nodes = tuple(sorted(str(p) for p in dev.glob("nvidia[0-9]*")))
    try:
        done = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return GpuProbe(nodes)
    if done.returncode != 0:
        return GpuProbe(nodes)
    cuda = parse_cuda_version(done.stdout)
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    names = parse_names(listed.stdout) if listed.returncode == 0 else ()
    return GpuProbe(nodes, True, names, cuda)


def parse_cuda_version(smi: str) -> tuple[int, int] | None:
    """The driver's CUDA version from nvidia-smi's table header ("CUDA Version: 13.0")."""
    version = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", smi)
    return (int(version[1]), int(version[2])) if version else None


def parse_names(listing: str) -> tuple[str, ...]:
    """GPU names from `nvidia-smi -L` ("GPU 0: NVIDIA H200 (UUID: GPU-...)")."""
    return tuple(re.findall(r"^GPU \d+: (.+?) \(UUID", listing, re.M))


@dataclass(frozen=True)
class TorchPlan:
    """What `make setup` installs: pip's arguments, and why."""
    args: tuple[str, ...]
    reason: str


def torch_plan(gpu: GpuProbe, override: str = "") -> TorchPlan:
    """The CPU pin, or the CUDA build the driver supports where nvidia-smi answers. `override`
    (`make setup TORCH_CUDA=...`): "cpu", or a build tag such as "cu128"."""
    cpu = (f"torch=={TORCH}",)
    if override == "cpu":
        return TorchPlan(cpu, "the CPU build, as TORCH_CUDA=cpu asks")
    if override:
        return TorchPlan(_cuda_args(override), f"the {override} build, as TORCH_CUDA={override} asks")
    if not gpu.smi_ok:
        why = "no NVIDIA GPU" if not gpu.present else "nvidia-smi does not answer (is the driver installed?)"
        return TorchPlan(cpu, f"the CPU build: {why} ({gpu.describe()}); TORCH_CUDA=cu128 forces a CUDA build")
    if gpu.driver_cuda is None:
        tag = CUDA_BUILDS[1][1]
        return TorchPlan(_cuda_args(tag), f"the {tag} build: {gpu.describe()} (its CUDA version unread)")
    for needs, tag in CUDA_BUILDS:
        if gpu.driver_cuda >= needs:
            return TorchPlan(_cuda_args(tag), f"the {tag} build for {gpu.describe()}")
    return TorchPlan(cpu, f"the CPU build: {gpu.describe()} is older than torch {TORCH}'s CUDA builds need "
                          f"({CUDA_BUILDS[-1][0][0]}.{CUDA_BUILDS[-1][0][1]}); update the NVIDIA driver")


def _cuda_args(tag: str) -> tuple[str, ...]:
    # the build from PyTorch's index; its dependencies (nvidia-*) from there or from PyPI
    return (f"torch=={TORCH}+{tag}", "--index-url", CUDA_INDEX + tag, "--extra-index-url", "https://pypi.org/simple")


@dataclass(frozen=True)
class TorchCuda:
    """What the installed torch says about CUDA."""
    version: str
    cuda: str | None          # the CUDA it was built for; None for a CPU build
    available: bool
    name: str | None = None   # of device 0

    @staticmethod
    def read() -> TorchCuda:
        import torch

        available = torch.cuda.is_available()
        return TorchCuda(torch.__version__, torch.version.cuda, available,
                         torch.cuda.get_device_name(0) if available else None)


@dataclass(frozen=True)
class DeviceChoice:
    device: str               # "cuda:0", "cpu", ...; "" when `error` says why none can be had
    reason: str
    warning: str | None = None
    error: str | None = None


def choose_device(requested: str, gpu: GpuProbe, torch_cuda: TorchCuda) -> DeviceChoice:
    """Which device `models.device` means here, and why in words."""
    if requested == "cpu":
        return DeviceChoice("cpu", "models.device = cpu")
    if requested.startswith("cuda"):
        if torch_cuda.available:
            device = requested if ":" in requested else "cuda:0"
            return DeviceChoice(device, f"models.device = {requested}: {torch_cuda.name}")
        return DeviceChoice("", "", error=f"models.device = {requested!r}, but {no_cuda(gpu, torch_cuda)}")
    if requested != "auto":
        return DeviceChoice("", "", error=f"models.device = {requested!r}: choose auto, cpu, cuda or cuda:N")
    if torch_cuda.available:
        return DeviceChoice("cuda:0", f"auto: {torch_cuda.name} (torch {torch_cuda.version})")
    if not gpu.present:
        return DeviceChoice("cpu", f"auto: no NVIDIA GPU ({gpu.describe()})")
    return DeviceChoice("cpu", "auto: torch cannot use the GPU", warning=no_cuda(gpu, torch_cuda))


def no_cuda(gpu: GpuProbe, torch_cuda: TorchCuda) -> str:
    """One line: why torch has no CUDA device here, and the fix."""
    if not gpu.present:
        return f"there is no NVIDIA GPU here ({gpu.describe()})"
    plan = torch_plan(gpu)
    fix = (f"`make setup` again, or `.venv/bin/pip install {' '.join(plan.args)}`"
           if plan.args[0] != f"torch=={TORCH}" else "see that nvidia-smi works, then `make setup` again")
    if torch_cuda.cuda is None:
        return f"a GPU is present ({gpu.describe()}) but torch {torch_cuda.version} is a CPU build; fix: {fix}"
    return (f"a GPU is present ({gpu.describe()}) but torch {torch_cuda.version} (CUDA {torch_cuda.cuda}) "
            f"cannot use it; fix: update the NVIDIA driver, or {fix}")


def main(argv: list[str]) -> int:
    """`pip-args [OVERRIDE]`: print pip's arguments for torch (the reason on stderr)."""
    if not argv or argv[0] != "pip-args":
        print("usage: python models/gpu.py pip-args [cpu|cuNNN]", file=sys.stderr)
        return 2
    plan = torch_plan(probe_gpu(), argv[1] if len(argv) > 1 else "")
    print(f"torch: {plan.reason}", file=sys.stderr)
    print(" ".join(plan.args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
