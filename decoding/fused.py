"""Each decoder layer of a Llama-shaped model with block weights in one call of specd's kernels
(kernels/layer.c), where `Lean` ran ~40 small torch ops and seven matmul calls per layer.

Why: a width-1 pass of the built-in target on 2 cores took ~45 ms where its matmuls alone took
~36 and its weights' bytes ~28 (`specd bench --profile`); ~5 ms were torch's ops between the
matmuls (norms, rotary in six ops, the cache's index copies, views) and each matmul's Python
call. In C the layer's projections that share an input also share one pool call (q, k and v;
gate and up), their input quantized once.

Exactness: every value is computed from its own row in one fixed order (layer.c), so the width
probe and the history tests see what they saw with `Lean`'s ops: a row's bits never depend on the
pass's width or chunking. The norms and SiLU are specd's own arithmetic, not torch's, so a token
can differ from what the torch ops gave where the target's top two are nearly tied; rotary and
the residual adds round as torch's ops do. $SPECD_FUSED_LAYERS=0 runs `Lean`'s torch ops, to
compare.
"""

from __future__ import annotations

import ctypes
import os
import threading
from functools import cache

import torch

from specd.decoding import qkernel
from specd.decoding.blocks import BlockLinear

PROJECTIONS = (("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
               ("o", "self_attn.o_proj"), ("gate", "mlp.gate_proj"), ("up", "mlp.up_proj"), ("down", "mlp.down_proj"))
PHASES = ("matmuls", "attention", "norms, rotary", "cache writes", "other ops")  # layer.c's, in its order


class Linear(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("n", ctypes.c_int), ("w", ctypes.c_void_p), ("bias", ctypes.c_void_p)]


class Layer(ctypes.Structure):
    _fields_ = [*((name, Linear) for name, _ in PROJECTIONS),
                ("norm1", ctypes.c_void_p), ("norm2", ctypes.c_void_p), ("eps", ctypes.c_float),
                ("scale", ctypes.c_float), ("hidden", ctypes.c_int), ("heads", ctypes.c_int),
                ("kv_heads", ctypes.c_int), ("d", ctypes.c_int), ("inter", ctypes.c_int)]


def wanted() -> bool:
    return os.environ.get("SPECD_FUSED_LAYERS", "1") != "0"


@cache
def _library() -> ctypes.CDLL:
    """The kernels' library with layer.c's functions typed."""
    lib = qkernel.library()
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.specd_layer.argtypes = [p, p, i, i, p, p, p, p, i, p, p]
    lib.specd_layer_work.argtypes = lib.specd_layer_scratch.argtypes = [p, i]
    lib.specd_layer_work.restype = lib.specd_layer_scratch.restype = ctypes.c_size_t
    lib.specd_layer_timing.argtypes = [i, p]
    return lib


class FusedLayers:
    """The decoder layers of `model` as layer.c's descriptors; `run` puts rows through one."""

    def __init__(self, model: torch.nn.Module, head_dim: int, scale: float):
        c = model.config
        self.lib = _library()
        self.kv_heads, self.head_dim = c.num_key_value_heads, head_dim
        self.layers = [self._describe(layer, c, head_dim, scale) for layer in model.model.layers]
        self._local = threading.local()

    @staticmethod
    def fits(model: torch.nn.Module) -> bool:
        """Every projection of every layer on block weights, float32 norms with weights."""
        for layer in model.model.layers:
            if not all(isinstance(layer.get_submodule(path), BlockLinear) for _, path in PROJECTIONS):
                return False
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                if getattr(norm, "weight", None) is None or norm.weight.dtype != torch.float32:
                    return False
        return True

    @staticmethod
    def _describe(layer: torch.nn.Module, c, head_dim: int, scale: float) -> Layer:
        def linear(path: str) -> Linear:
            m = layer.get_submodule(path)
            return Linear(m.kind, m.out_features, m.blocks.data_ptr(),
                          None if m.bias is None else m.bias.data_ptr())

        norms = [n.weight.detach().contiguous() for n in (layer.input_layernorm, layer.post_attention_layernorm)]
        described = Layer(*(linear(path) for _, path in PROJECTIONS), norms[0].data_ptr(), norms[1].data_ptr(),
                          c.rms_norm_eps, scale, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
                          head_dim, layer.mlp.gate_proj.out_features)
        described.keep = norms  # the norms' weights live as long as their pointers
        return described

    def run(self, index: int, x: torch.Tensor, start: int, cos: torch.Tensor, sin: torch.Tensor, kv) -> None:
        """x [S, E] float32 (rows at positions start..) through layer `index` in place, writing its
        keys and values into `kv` (a static cache layer) at start.. and counting them written."""
        s = x.shape[0]
        keys, values = kv.keys, kv.values                                   # [1, H_kv, capacity, D]: halves
        assert x.dtype == torch.float32 and keys.dtype == qkernel.KV_DTYPE
        assert x.is_contiguous() and keys.is_contiguous()
        described = self.layers[index]
        work, scratch = self._buffers(described, s)
        rc = self.lib.specd_layer(ctypes.addressof(described), x.data_ptr(), s, start, cos.data_ptr(), sin.data_ptr(),
                                  keys.data_ptr(), values.data_ptr(), keys.shape[2], work, scratch)
        assert rc == 0, f"layer {index} refused {s} rows at {start} of {keys.shape[2]}"
        kv.cumulative_length.add_(s)

    def _buffers(self, described: Layer, s: int) -> tuple[int, int]:
        """This thread's work (floats) and scratch (bytes) for `s` rows, grown as needed."""
        ref = ctypes.addressof(described)
        need = (self.lib.specd_layer_work(ref, s), self.lib.specd_layer_scratch(ref, s))
        have = getattr(self._local, "buffers", None)
        if have is None or have[0].numel() < need[0] or have[1].numel() < need[1]:
            have = self._local.buffers = (torch.empty(max(need[0], 1 << 14)), torch.empty(max(need[1], 1 << 16),
                                                                                            dtype=torch.uint8))
        return have[0].data_ptr(), have[1].data_ptr()


def timing(on: bool) -> dict[str, float]:
    """Turn layer.c's clock on (afresh) or off; returns ms per phase since it was last turned on."""
    out = (ctypes.c_double * len(PHASES))()
    _library().specd_layer_timing(int(on), out)
    return {phase: seconds * 1e3 for phase, seconds in zip(PHASES, out)}
