"""The worked example of docs/deciding-before-release.md: extraction risk at a product's
decoding settings on a memorising causal LM.

``privacy-audit experiment deciding-before-release --out docs/records/deciding-before-release.json``

A GPT-2 from config (word-level tokenizer built in memory, d = 64, 2 blocks) is fine-tuned
without privacy on ``n_train`` member records of random words (so anything it emits from
them is memorised, never predicted) until it memorises them, saved with
``save_pretrained``, and audited as a user's model through the CLI one-liner with
``--temperature 0.7 --top-p 0.9`` (top-k left at transformers' default 50). Non-members are
records of the same kind it never saw. Per seed the JSON keeps the members' and
non-members' median risk within 1, 10, 100 and 1000 queries with their 95% intervals, the
fractions above 1% / 10% / 50%, and the gate's decision at ``extraction-risk@100=0.01``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

WORDS = [f"w{i}" for i in range(120)]
EOS, UNK = "<|endoftext|>", "<unk>"
DECODING = {"temperature": 0.7, "top_k": 50, "top_p": 0.9}
PREFIX, SUFFIX, LENGTH = 8, 8, 20
QUERIES = (1, 10, 100, 1000)
EPOCHS = (12, 24, 36, 60)


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {EOS: 0, UNK: 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=EOS, eos_token=EOS, unk_token=UNK
    )


def _texts(n: int, rng) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=LENGTH)) for _ in range(n)]


def _memorising_lm(root: Path, members: list[str], seed: int, epochs: int) -> Path:
    import torch
    import transformers as tf

    from privacy_audit.targets.lm import train_lm
    from privacy_audit.targets.scoring import HFTokenizer

    hf = _tokenizer()
    torch.manual_seed(seed)
    cfg = tf.GPT2Config(
        vocab_size=len(hf),
        n_embd=64,
        n_layer=2,
        n_head=2,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = tf.GPT2LMHeadModel(cfg)
    train_lm(model, HFTokenizer(hf), members, epochs, 16, 3e-3, 32, seed=seed)
    model.save_pretrained(root / "model")
    hf.save_pretrained(root / "model")
    return root / "model"


def _command(argv: list[str]) -> int:
    """``privacy-audit run|gate ...`` through the command's own module (not the CLI, which
    loads the experiments); bad input raises AuditError."""
    from privacy_audit.audit.commands import gate
    from privacy_audit.audit.commands import run as run_command
    from privacy_audit.audit.commands.common import command_parser

    command = {"run": run_command, "gate": gate}[argv[0]]
    return command.run(command_parser([command]).parse_args(argv))


def _cell(seed: int, n: int, epochs: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    members, nonmembers = _texts(n, rng), _texts(n, rng)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = _memorising_lm(root, members, seed, epochs)
        (root / "members.txt").write_text("\n".join(members) + "\n", encoding="utf-8")
        (root / "nonmembers.txt").write_text("\n".join(nonmembers) + "\n", encoding="utf-8")
        argv = [
            "run", "--model", str(model), "--members", str(root / "members.txt"),
            "--nonmembers", str(root / "nonmembers.txt"), "--out", str(root / "out"),
            "--max-length", "32", "--device", "cpu", "--quiet",
            "--temperature", str(DECODING["temperature"]), "--top-k", str(DECODING["top_k"]),
            "--top-p", str(DECODING["top_p"]), "--prefix-tokens", str(PREFIX),
            "--suffix-tokens", str(SUFFIX), "--queries", ",".join(map(str, QUERIES)),
        ]  # fmt: skip
        if _command(argv) != 0:
            raise RuntimeError("the audit failed")
        results = json.loads((root / "out" / "results.json").read_text(encoding="utf-8"))
        gate = _command(
            ["gate", str(root / "out" / "results.json"), "--max-leakage",
             "extraction-risk@100=0.01"]
        )  # fmt: skip
    run = results["runs"][0]
    rec = next(r for r in run["leakage"] if r["attack"] == "extraction-risk")
    keep = {
        k: v
        for k, v in rec["metrics"].items()
        if "median" in k or "frac" in k or k.startswith("max_")
    }
    strongest = next(a for a in run["attacks"] if a["attack"] == run["strongest_attack"])
    return {
        "seed": seed,
        "members": n,
        "nonmembers": n,
        "epochs": epochs,
        "metrics": keep,
        "eligible": rec["details"]["eligible"],
        "strongest_attack": run["strongest_attack"],
        "strongest_auc": strongest["metrics"]["auc"],
        "gate_extraction_risk_at_100_exit": gate,
    }


def run(settings, cells) -> dict[str, Any]:
    n = settings.n_train or (16 if settings.quick else 100)
    # training lengths from not yet extractable through partly memorised to memorised
    schedule = (2, 5) if settings.quick else EPOCHS
    out = []
    for epochs in schedule:
        for seed in range(settings.seeds):
            out.append(
                cells.get(
                    f"epochs={epochs}-seed={seed}",
                    lambda seed=seed, epochs=epochs: _cell(seed, n, epochs),
                )
            )
    return {
        "setting": {
            "model": "GPT-2 from config, d=64, 2 blocks, word-level vocabulary of 122",
            "records": f"{LENGTH} random words each",
            "decoding": DECODING,
            "prefix_tokens": PREFIX,
            "suffix_tokens": SUFFIX,
            "queries": list(QUERIES),
            "training": f"{' or '.join(map(str, schedule))} epochs of AdamW (lr 3e-3, batch 16), "
            "no privacy",
        },
        "cells": out,
    }
