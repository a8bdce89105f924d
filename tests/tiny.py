"""Tiny real models for tests: a byte-level BPE tokenizer trained here, seeded Qwen2 models built
from a config, and the same model written as a GGUF file. They load through the project's own
code path, exactly as the built-in pair does."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import torch

FIM_TOKENS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|file_sep|>", "<|repo_name|>", "<|im_end|>"]


def corpus() -> list[str]:
    """Training text for the tokenizer: a few standard-library modules."""
    import argparse  # noqa: E401
    import json as json_module
    import string
    import textwrap

    return [inspect.getsource(m) for m in (argparse, json_module.decoder, textwrap, string)]


def make_tokenizer(folder: Path, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=FIM_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(corpus(), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                        pad_token="<|endoftext|>", unk_token=None)
    tokenizer.save_pretrained(folder)
    return tokenizer


def make_model(folder: Path, vocab_size: int = 400, seed: int = 0, layers: int = 2,
               hidden: int = 64, tokenizer_from: Path | None = None, train_steps: int = 200) -> Path:
    """A seeded tiny Qwen2 with its tokenizer, saved as a folder `from_pretrained` loads.

    A few hundred seeded training steps on standard-library code make it write code-like text
    that repeats itself, as real code models do; an untrained one emits a stop token within a few
    tokens of noise, and would leave the drafters nothing to be right or wrong about."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer_from is not None:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
        tokenizer.save_pretrained(folder)
    else:
        tokenizer = make_tokenizer(folder, vocab_size)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, tie_word_embeddings=False,
                         bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    train(model, tokenizer, train_steps, seed)
    model.save_pretrained(folder)
    return folder


def train(model, tokenizer, steps: int, seed: int, length: int = 128, batch: int = 16) -> None:
    if steps <= 0:
        return
    ids = torch.tensor(tokenizer.encode("\n".join(corpus()), add_special_tokens=False))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - length, (batch,), generator=g)
        x = torch.stack([ids[s:s + length] for s in starts])              # [B, T]
        loss = model(input_ids=x, labels=x).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def make_draft(target: Path, folder: Path, seed: int, noise: float = 0.1, layers: int = 1) -> Path:
    """A cheaper draft that is right only part of the time: the target's first `layers` layers
    (an early exit) with seeded noise of `noise` times each tensor's spread added. Same tokenizer,
    so it passes the vocabulary check."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    model.config.layer_types = model.config.layer_types[:layers]
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * p.std().clamp_min(1e-3) * noise)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(target).save_pretrained(folder)
    return folder


def write_gguf(model_folder: Path, out: Path) -> Path:
    """The tiny model in `model_folder` as a GGUF file (f32 tensors, GPT-2 style BPE tokenizer)."""
    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    c = model.config
    w = gguf.GGUFWriter(str(out), "qwen2")
    w.add_name("tiny-qwen2")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"] if getattr(c, "rope_parameters", None) else 10000.0)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    _add_tokenizer(w, tokenizer, model_folder)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
                 "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
                 "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    for name, tensor in model.state_dict().items():
        if name in names:
            gguf_name = names[name]
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            gguf_name = f"blk.{layer}.{per_layer[rest]}"
        w.add_tensor(gguf_name, tensor.numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def _add_tokenizer(w, tokenizer, folder: Path) -> None:
    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    tokens = [None] * len(tokenizer)
    for text, i in vocab.items():
        tokens[i] = text
    special = {t["content"]: t["id"] for t in data["added_tokens"]}
    for text, i in special.items():
        tokens[i] = text
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in special else 1 for t in tokens])  # 3: control, 1: normal
    merges = data["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_eos_token_id(tokenizer.eos_token_id)
    w.add_bos_token_id(tokenizer.eos_token_id)
    w.add_pad_token_id(tokenizer.pad_token_id)
    w.add_add_bos_token(False)
