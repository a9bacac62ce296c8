"""Tiny users' models for the "audit your own model" tests, built offline.

A word-level Hugging Face tokenizer (``tokenizers`` WordLevel, in memory) with an
``<|endoftext|>`` BOS/EOS token and **no pad token**, and causal LMs of four
architectures (GPT-2, Llama, GPT-NeoX, OPT) from small configs (d = 32-64, 2 layers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

EOS = "<|endoftext|>"
UNK = "<unk>"
WORDS = [f"w{i}" for i in range(120)] + ["the", "a", "of", "and", "to", "is", "secret", "code"]


def word_tokenizer(words=WORDS):
    """A fast word-level tokenizer without a pad token (GPT-2-like special tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {EOS: 0, UNK: 1}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS, unk_token=UNK)
    assert hf.pad_token is None
    return hf


def random_texts(n: int, seed: int, length: int = 12, words=WORDS) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words[:120], size=length)) for _ in range(n)]


def build_causal_lm(arch: str, vocab_size: int, seed: int = 0, d: int = 48):
    """A randomly initialised causal LM of ``arch`` from a small config."""
    import transformers as tf

    torch.manual_seed(seed)
    common = dict(vocab_size=vocab_size, bos_token_id=0, eos_token_id=0)
    if arch == "gpt2":
        cfg = tf.GPT2Config(n_embd=d, n_layer=2, n_head=2, n_positions=64, **common)
        return tf.GPT2LMHeadModel(cfg)
    if arch == "llama":
        cfg = tf.LlamaConfig(
            hidden_size=d,
            intermediate_size=2 * d,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=64,
            **common,
        )
        return tf.LlamaForCausalLM(cfg)
    if arch == "gpt-neox":
        cfg = tf.GPTNeoXConfig(
            hidden_size=d,
            intermediate_size=2 * d,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=64,
            **common,
        )
        return tf.GPTNeoXForCausalLM(cfg)
    if arch == "opt":
        cfg = tf.OPTConfig(
            hidden_size=d,
            ffn_dim=2 * d,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=64,
            word_embed_proj_dim=d,
            pad_token_id=1,
            **common,
        )
        return tf.OPTForCausalLM(cfg)
    raise ValueError(arch)


def fine_tune(model, hf_tokenizer, texts, epochs: int = 40, lr: float = 3e-3, seed: int = 0):
    """Plain AdamW fine-tuning with the suite's LM loop (rows as ``tokenizer(text)``)."""
    from privacy_audit.targets.lm import train_lm
    from privacy_audit.targets.scoring import HFTokenizer

    return train_lm(model, HFTokenizer(hf_tokenizer), list(texts), epochs, 8, lr, 32, seed=seed)


def save(model, tokenizer, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_lines(path: Path, texts) -> Path:
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path
