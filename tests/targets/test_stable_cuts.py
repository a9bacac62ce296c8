"""A text cut between two pre-tokens of a byte-level BPE is not re-encoded to check the cut
(targets/scoring.py ``HFTokenizer.stable_cuts``, issue 38 item 2).

The claim is a property of the GPT-2 regex pre-tokenizer, so it is tested on real text of
several kinds (Python's documentation topics, installed packages' descriptions with
Markdown, code and non-ASCII text, stdlib docstrings, Debian changelogs) at several
lengths, against two independent computations: the path that re-encodes every cut text,
and plain ``tokenizer(text, truncation=True, max_length=...)``."""

from __future__ import annotations

import gzip
import inspect
import random
from importlib import metadata
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from privacy_audit.targets.scoring import HFTokenizer, byte_level_alphabet


def _corpora() -> dict[str, list[str]]:
    import pydoc_data.topics as topics

    out: dict[str, list[str]] = {}
    out["pydoc"] = [t for t in topics.topics.values() if len(t) > 200][:150]
    descs = []
    for dist in metadata.distributions():
        body = dist.metadata.get_payload() if dist.metadata else ""
        if body and len(body) > 400:
            descs.append(body[:6000])
    out["metadata"] = sorted(descs)[:120]
    import collections
    import email
    import json as json_mod
    import os

    out["docstrings"] = [
        inspect.getdoc(obj)
        for mod in (os, json_mod, collections, email, inspect, random, gzip)
        for _, obj in inspect.getmembers(mod)
        if inspect.getdoc(obj) and len(inspect.getdoc(obj)) > 300
    ][:150]
    logs = []
    for path in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz"))[:80]:
        try:
            logs.append(gzip.open(path, "rt", encoding="utf-8").read(5000))
        except (OSError, UnicodeDecodeError):
            continue
    out["changelogs"] = logs
    # cuts that must fall back: inside a multi-byte character the BPE splits into bytes
    # (emoji and CJK unseen in training), and inside runs of mixed white space
    rng = random.Random(0)
    glyphs = ["\U0001f600", "\U0001f680", "\u4e2d", "\u6587", "\u00e9", " ", "  ", "\t", "\n"]
    out["constructed"] = [
        "".join(
            rng.choice(glyphs) + rng.choice(["", "ab", " cd", "\n\n", "   "]) for _ in range(90)
        )
        for _ in range(60)
    ]
    return {k: v for k, v in out.items() if v}


def _bpe(texts: list[str], vocab: int, prefix_space: bool, normalizer=None):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tok.decoder = decoders.ByteLevel()
    if normalizer is not None:
        tok.normalizer = normalizer
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )


@pytest.fixture(scope="module")
def corpora():
    return _corpora()


def test_the_byte_level_alphabet_is_the_byte_level_pre_tokenizers():
    """Against the ``tokenizers`` pre-tokenizer itself: every byte of every 1- to 4-byte
    UTF-8 character (all bytes valid UTF-8 uses) maps as the pre-tokenizer maps it."""
    table = byte_level_alphabet()
    assert sorted(table.values()) == sorted(pre_tokenizers.ByteLevel.alphabet())
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    seen = set()
    three = [0x800, *range(0x1000, 0x10000, 0x1000)]  # every 3-byte lead, E0 to EF
    four = [0x10000, 0x40000, 0x80000, 0xC0000, 0x100000]  # F0 to F4
    for cp in [*range(0, 0x800), *three, *four, 0x10FFFF, 0xFFFD]:
        ch = chr(cp)
        (piece, _), *_ = pre.pre_tokenize_str(ch)
        raw = ch.encode("utf-8")
        assert piece == "".join(table[b] for b in raw), hex(cp)
        seen.update(raw)
    assert len(seen) == 256 - 13  # all but the bytes UTF-8 never uses (C0, C1, F5-FF)


@pytest.mark.parametrize(("vocab", "prefix_space"), [(2000, False), (8000, True)])
def test_stable_cuts_equal_the_re_encoding_path_and_plain_truncation(corpora, vocab, prefix_space):
    train = [t for name, texts in corpora.items() if name != "constructed" for t in texts[::2]]
    hf = _bpe(train, vocab, prefix_space)
    fast, slow = HFTokenizer(hf), HFTokenizer(hf)
    assert fast.stable_cuts()
    slow._stable_cuts = False  # every cut text re-encoded and compared
    taken = checked = 0
    for name, texts in corpora.items():
        for text in texts:
            for max_length in (5, 17, 64, 200):
                budget = max_length - fast.specials
                before = len(fast._encoded)
                got = fast.truncate_text(text, max_length)
                want = slow.truncate_text(text, max_length)
                assert got == want, (name, max_length, text[:80])
                if got == text:
                    continue
                checked += 1
                ids = hf(text, add_special_tokens=False, truncation=True, max_length=budget)
                kept = hf(got, add_special_tokens=False)["input_ids"]
                assert kept == ids["input_ids"][: len(kept)], (name, max_length)
                # the fast path remembered the cut text's ids without encoding it
                if len(fast._encoded) > before and fast._encoded[got].size == budget:
                    taken += 1
    assert checked > 800
    assert taken > checked // 2  # the property is exercised, not only its fallback


def test_a_normaliser_or_another_pre_tokenizer_keeps_the_check(corpora):
    texts = corpora["pydoc"][:40]
    nfc = _bpe(texts, 1000, False, normalizers.NFC())
    assert not HFTokenizer(nfc).stable_cuts()
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=500, special_tokens=["[UNK]"]))
    ws = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="[UNK]")
    assert not HFTokenizer(ws).stable_cuts()


def test_a_cut_text_is_encoded_once_with_a_byte_level_bpe(corpora, monkeypatch):
    hf = _bpe(corpora["pydoc"], 2000, False)
    tok = HFTokenizer(hf)
    text = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu. " * 40
    want = list(hf(text, truncation=True, max_length=32)["input_ids"])
    calls: list[str] = []
    original = PreTrainedTokenizerFast.__call__

    def counting(self, text=None, *args, **kwargs):
        if isinstance(text, str):
            calls.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerFast, "__call__", counting)
    cut = tok.truncate_text(text, 32)
    assert len(calls) == 1 and cut != text  # the head only, no re-encoding of the cut
    assert tok.row(cut, 32) == want
    assert len(calls) == 1  # scoring reads the remembered ids
