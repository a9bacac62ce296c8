"""Designed canaries in the ``re-attention``, ``dp-blogs`` and ``phantom-dp-sgd`` trainers (issue 20,
acceptance 3), through the config path a user takes (``parse_config`` → ``run_audit``).

A spy on the defense's ``fit`` keeps what the runner handed it (the target and the
training set) and what it returned (the release), so each test checks the canaries from
both ends: the included canaries, r copies each, are in the training data the defense
saw, and no excluded canary is; the new-token rows are in the trained model; and the
input-canary record of the ε audit describes exactly those canaries.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privacy_audit.audit.config import parse_config
from privacy_audit.audit.runner import run_audit
from privacy_audit.defenses.dp_blogs import DPBloGS
from privacy_audit.defenses.re_attention import ReAttention, ReAttentionDefense

N_MEMBERS, N_CANARIES, SECRET_TOKENS = 24, 40, 8


def _raw(defense: dict, kind: str, repeat: int, epochs: int = 3, lr: float = 1e-2) -> dict:
    return {
        "seed": 0,
        "data": {"n_members": N_MEMBERS, "n_nonmembers": 24, "n_test": 12},
        "target": {"preset": "tiny-gpt2-word", "max_length": 40},
        "train": {"epochs": epochs, "batch_size": 8, "learning_rate": lr},
        "defenses": [defense],
        "attacks": {"names": ["loss"]},
        "metrics": {"bootstrap": 100},
        "epsilon": {
            "enabled": True,
            "canaries": N_CANARIES,
            "canary_kind": kind,
            "canary_repeat": repeat,
            "gradient_trials": 2000,
            "white_box_canaries": 400,
        },
    }


# dp-blogs: one micro-batch per step and a small white-box shuffle audit, to stay fast
BLOGS = {"name": "dp-blogs", "accumulation_steps": 1, "audit_trials": 100, "audit_batch": 8}
RE_ATTENTION = {"name": "re-attention", "noise_multiplier": 0.85, "accountant": "rdp"}


def _spy(monkeypatch, cls) -> dict:
    seen: dict = {}
    fit = cls.fit

    def spying_fit(self, target, train, training, seed):
        release, report = fit(self, target, train, training, seed)
        seen.update(target=target, train=train, release=release)
        return release, report

    monkeypatch.setattr(cls, "fit", spying_fit)
    return seen


def _input_canaries(run: dict) -> dict:
    (ic,) = [a for a in run["epsilon_audit"]["audits"] if a["name"] == "input-canaries (one-run)"]
    return ic


def _check_record(ic: dict, design: str, repeat: int) -> None:
    assert ic["status"] == "ok" and ic["design"] == design and ic["repeat"] == repeat
    assert ic["canaries"] == ic["n_in"] + ic["n_out"] == N_CANARIES
    assert np.isfinite(ic["epsilon_lb"]) and np.isfinite(ic["ceiling"])
    assert 0 <= ic["epsilon_lb"] <= ic["ceiling"]
    lo, hi = ic["tpr_at_1pct_fpr_ci"]
    assert 0 <= lo <= ic["tpr_at_1pct_fpr"] <= hi <= 1
    if repeat > 1:
        assert f"group privacy, r = {repeat}" in ic["method"]


def _check_training_set(train, ic: dict, repeat: int) -> list[str]:
    """The included canaries, ``repeat`` copies each, and nothing else, were trained on;
    returns their training texts."""
    members = np.asarray(ic["examples"]["members"])
    assert members.size == N_CANARIES and int(members.sum()) == ic["n_in"]
    copies = Counter(i.split("#")[0] for i in train.ids if i.startswith("canary-"))
    assert set(copies) == {f"canary-{i:05d}" for i in np.flatnonzero(members == 1)}
    assert set(copies.values()) == {repeat}
    assert len(train) == N_MEMBERS + repeat * ic["n_in"]
    return [t for i, t in zip(train.ids, train.texts, strict=True) if i.startswith("canary-")]


def _check_claim_comparison(run: dict) -> None:
    """The verdict follows from measured things only: "consistent" needs an audit that
    ran and could have exceeded the claim (ceiling above it); the asymptotic Gaussian
    bound never counts."""
    claim, ea, ic = run["claim"], run["epsilon_audit"], _input_canaries(run)
    assert claim["unit"] == "sequence" and claim["notion"] == "central-dp"
    assert ea["comparable"] is True and ea["claimed_epsilon"] == claim["epsilon"]
    assert ic["exceeds_claim"] == (ic["epsilon_lb"] > claim["epsilon"])
    # 40 canaries cannot certify the claimed ε: this audit alone never says "consistent"
    assert ic["ceiling"] < claim["epsilon"]
    measured = [a for a in ea["audits"] if a["status"] == "ok" and not a.get("asymptotic")]
    testable = any(a["ceiling"] > claim["epsilon"] for a in measured)
    expected = "violated" if ea["evidence"] else "consistent" if testable else "untestable"
    assert ea["status"] == expected


def _check_new_token_rows(seen: dict) -> list[int]:
    """The trained model's vocabulary is the target's plus one row per canary token;
    returns the new tokens' ids."""
    target, release = seen["target"], seen["release"]
    new = target.new_tokens
    assert len(new) == len(set(new)) == N_CANARIES * SECRET_TOKENS
    _, base_tokenizer = target._t.build(0)  # the same target without the canaries
    rows = release.model.get_input_embeddings().weight.shape[0]
    assert rows == len(base_tokenizer) + len(new) == len(release.tokenizer)
    assert release.model.get_output_embeddings().weight.shape[0] == rows
    ids = [release.tokenizer.index[t] for t in new]
    assert sorted(ids) == list(range(len(base_tokenizer), rows))
    return ids


@pytest.mark.slow
def test_re_attention_trains_on_new_token_canaries(monkeypatch):
    seen = _spy(monkeypatch, ReAttentionDefense)
    res = run_audit(parse_config(_raw(RE_ATTENTION, "new-token", repeat=2)), progress=False)
    (run,) = res["runs"]
    ic = _input_canaries(run)
    _check_record(ic, "new-token", 2)
    texts = _check_training_set(seen["train"], ic, 2)
    ids = _check_new_token_rows(seen)
    new = set(seen["target"].new_tokens)
    # every trained canary's secret is new tokens; no excluded canary's token was trained on
    assert all(set(t.split()[-SECRET_TOKENS:]) <= new for t in texts)
    trained = {w for t in seen["train"].texts for w in t.split()} & new
    assert len(trained) == ic["n_in"] * SECRET_TOKENS
    # Re-Attention's noise model covers the new rows: they never occur in the public
    # text, so they get the smallest inclusion probability, i.e. the largest variance
    hooks = seen["release"].model.transformer._forward_pre_hooks.values()
    (ra,) = [h.__self__ for h in hooks if isinstance(getattr(h, "__self__", None), ReAttention)]
    token_var = ra.noise.token_var
    assert token_var.shape[0] == len(seen["release"].tokenizer)
    assert torch.all(token_var[ids] == token_var.max())
    # the canaries reached the optimiser: even at the claimed ε ≈ 7.4, 24 noisy steps fit
    # the twice-repeated included canaries more than the excluded ones (AUC 0.79 at seed 0)
    assert roc_auc_score(ic["examples"]["members"], ic["examples"]["scores"]) >= 0.65
    assert run["claim"]["proven"] is True
    _check_claim_comparison(run)


@pytest.mark.slow
def test_phantom_dp_sgd_trains_on_new_token_canaries(monkeypatch):
    """phantom-dp-sgd (the engine re-attention builds on) had no designed-canary test."""
    from privacy_audit.defenses.phantom_dp_sgd import PhantomDPSGD

    seen = _spy(monkeypatch, PhantomDPSGD)
    phantom = {"name": "phantom-dp-sgd", "noise_multiplier": 0.85, "accountant": "rdp"}
    (run,) = run_audit(parse_config(_raw(phantom, "new-token", repeat=2)), progress=False)["runs"]
    ic = _input_canaries(run)
    _check_record(ic, "new-token", 2)
    _check_training_set(seen["train"], ic, 2)
    _check_new_token_rows(seen)
    _check_claim_comparison(run)


@pytest.mark.slow
def test_re_attention_trains_on_bigram_canaries(monkeypatch):
    """bigram canaries add no tokens: the target is not wrapped and the vocabulary stays."""
    seen = _spy(monkeypatch, ReAttentionDefense)
    (run,) = run_audit(parse_config(_raw(RE_ATTENTION, "bigram", repeat=2)), progress=False)["runs"]
    ic = _input_canaries(run)
    _check_record(ic, "bigram", 2)
    texts = _check_training_set(seen["train"], ic, 2)
    release = seen["release"]
    assert not hasattr(seen["target"], "new_tokens")
    _, base_tokenizer = seen["target"].build(0)
    assert release.model.get_input_embeddings().weight.shape[0] == len(base_tokenizer)
    # the secrets come from a bigram model of the members' text: every word is one of theirs
    tok = release.tokenizer
    train = seen["train"]
    words = {
        w
        for i, t in zip(train.ids, train.texts, strict=True)
        if i[:7] != "canary-"
        for w in tok.tokenize(t)
    }
    assert all(set(tok.tokenize(t)[-SECRET_TOKENS:]) <= words for t in texts)
    _check_claim_comparison(run)


@pytest.mark.slow
def test_dp_blogs_trains_on_new_token_canaries_and_they_leak(monkeypatch, tmp_path):
    """dp-blogs adds no noise; at a loose target ε its block shuffle leaves the gradient
    nearly intact, so the new-token canaries it trained on are told apart from the ones
    it did not: the black-box one-run bound is positive. Its claim is the paper's
    accountant, labelled unproven, on a unit these audits test."""
    from privacy_audit.audit.results import write_outputs

    seen = _spy(monkeypatch, DPBloGS)
    raw = _raw({**BLOGS, "epsilon": 100.0}, "new-token", repeat=1, epochs=8, lr=3e-2)
    res = run_audit(parse_config(raw), progress=False)
    (run,) = res["runs"]
    ic = _input_canaries(run)
    _check_record(ic, "new-token", 1)
    texts = _check_training_set(seen["train"], ic, 1)
    _check_new_token_rows(seen)
    new = set(seen["target"].new_tokens)
    trained = {w for t in seen["train"].texts for w in t.split()} & new
    assert len(trained) == ic["n_in"] * SECRET_TOKENS == len(texts) * SECRET_TOKENS
    scores, members = ic["examples"]["scores"], ic["examples"]["members"]
    assert roc_auc_score(members, scores) >= 0.75
    assert ic["epsilon_lb"] > 0
    claim = run["claim"]
    assert claim["proven"] is False and "Not proven" in claim["note"]
    names = [a["name"] for a in run["epsilon_audit"]["audits"]]
    assert names == ["gradient-shuffle-canary", "input-canaries (one-run)"]
    _check_claim_comparison(run)
    # no canary id, text or token reaches report.html or results.json
    html, js = (p.read_text(encoding="utf-8") for p in write_outputs(res, tmp_path))
    for blob in (html, js):
        assert not re.search(r"canary-\d{5}", blob)
        assert not any(token in blob for token in new)


@pytest.mark.slow
def test_dp_blogs_new_token_canaries_on_a_users_llama(monkeypatch, tmp_path):
    """target.model_dir = a user's (untied) Llama: dp-blogs trains it with the canaries'
    new tokens added to its Hugging Face tokenizer, embedding and LM head; the user's
    directory is left as it was."""
    from transformers import AutoTokenizer

    from privacy_audit import fixtures
    from tests.own_models import build_causal_lm, word_tokenizer

    texts = [r["text"].lower() for r in fixtures.load_corpus("private")[:200]]
    hf = word_tokenizer(sorted({w for t in texts for w in t.split()}))
    model = build_causal_lm("llama", len(hf), d=32)
    assert not model.config.tie_word_embeddings
    model.save_pretrained(str(tmp_path))
    hf.save_pretrained(str(tmp_path))
    seen = _spy(monkeypatch, DPBloGS)
    raw = _raw({**BLOGS, "epsilon": 100.0}, "new-token", repeat=1)
    raw["target"] = {"model_dir": str(tmp_path), "max_length": 40}
    (run,) = run_audit(parse_config(raw), progress=False)["runs"]
    ic = _input_canaries(run)
    _check_record(ic, "new-token", 1)
    _check_training_set(seen["train"], ic, 1)
    trained = seen["release"].model
    grown = len(hf) + N_CANARIES * SECRET_TOKENS
    assert trained.get_input_embeddings().weight.shape[0] == grown
    assert trained.get_output_embeddings().weight.shape[0] == grown
    new = list(seen["target"].new_tokens)
    ids = seen["release"].tokenizer.hf.convert_tokens_to_ids(new)
    assert sorted(ids) == list(range(len(hf), grown))
    user_tok = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    assert len(user_tok) == len(hf)
    _check_claim_comparison(run)
