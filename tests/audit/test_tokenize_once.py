"""Tokenize once (issue 38, item 2): in ``run --model`` every member / non-member text is
encoded by the tokenizer once, and a text cut to ``max_length`` twice (its head, to find
the cut, then the cut text, whose ids are checked and then scored; a word-level tokenizer
here, so no cut is proven stable: tests/targets/test_stable_cuts.py), counted with a
wrapper around the Hugging Face tokenizer's ``__call__``, end to end through the CLI."""

from __future__ import annotations

from collections import Counter

from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines


def test_run_model_encodes_each_text_once(tmp_path, monkeypatch):
    import json

    from transformers import PreTrainedTokenizerFast

    from privacy_audit.audit.cli import main

    tok = word_tokenizer()
    model_dir = save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, tmp_path / "model")
    # distinct first words, so a call's text names the data text it encodes; the long
    # texts (90 words) are cut at max_length = 40 tokens
    short = [f"w{i} " + t for i, t in enumerate(random_texts(40, 1, length=10))]
    long = [f"w{40 + i} " + t for i, t in enumerate(random_texts(8, 2, length=90))]
    members, nonmembers = short[:20] + long[:4], short[20:] + long[4:]
    a = write_lines(tmp_path / "members.txt", members)
    b = write_lines(tmp_path / "nonmembers.txt", nonmembers)
    calls: list[str] = []
    original = PreTrainedTokenizerFast.__call__

    def counting(self, text=None, *args, **kwargs):
        if isinstance(text, str):
            calls.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerFast, "__call__", counting)
    out = tmp_path / "out"
    argv = ["run", "--model", str(model_dir), "--members", str(a), "--nonmembers", str(b)]
    rc = main([*argv, "--max-length", "40", "--out", str(out), "--quiet"])
    assert rc == 0
    by_text = Counter()
    for s in calls:
        for t in members + nonmembers:
            if s and t.startswith(s.split()[0] + " ") and t.startswith(s):
                by_text[t] += 1
    for t in short:
        assert by_text[t] == 1, (t, by_text[t])
    for t in long:
        assert by_text[t] == 2, (t, by_text[t])
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert res["runs"][0]["target"]["texts_cut_to_max_length"] == 8
