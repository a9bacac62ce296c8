"""Designed canaries in the built-in trainers' [epsilon] audit, and the one-run white-box
audits (thresholded and Gaussian) on the same DP-SGD run."""

from __future__ import annotations

import pytest

from privacy_audit.audit.config import load_config, parse_config
from privacy_audit.audit.runner import run_audit
from privacy_audit.ground.errors import ConfigError


def _raw(kind="new-token", repeat=1):
    return {
        "seed": 0,
        "data": {"n_members": 24, "n_nonmembers": 24, "n_test": 12},
        "target": {"preset": "tiny-gpt2-word", "max_length": 40},
        "train": {"epochs": 3, "batch_size": 8, "learning_rate": 1e-2},
        "defenses": [
            {"name": "none"},
            {"name": "dp-sgd", "epsilon": 8.0, "accountant": "rdp"},
        ],
        "attacks": {"names": ["loss"]},
        "metrics": {"bootstrap": 100},
        "epsilon": {
            "enabled": True,
            "canaries": 40,
            "canary_kind": kind,
            "canary_repeat": repeat,
            "gradient_trials": 2000,
            "white_box_canaries": 400,
        },
    }


@pytest.mark.slow
def test_builtin_trainers_insert_designed_canaries_and_report_every_audit():
    res = run_audit(parse_config(_raw(repeat=2)), progress=False)
    runs = {r["defense"]: r for r in res["runs"]}
    for run in runs.values():
        audits = {a["name"]: a for a in run["epsilon_audit"]["audits"]}
        ic = audits["input-canaries (one-run)"]
        assert ic["status"] == "ok" and ic["design"] == "new-token" and ic["repeat"] == 2
        assert ic["score"] == "raw"  # [epsilon] canary_reference is off by default
        assert 0 <= ic["epsilon_lb"] <= ic["ceiling"]
        lo, hi = ic["tpr_at_1pct_fpr_ci"]
        assert lo <= ic["tpr_at_1pct_fpr"] <= hi
        assert "group privacy, r = 2" in ic["method"] and ic["threat_model"].startswith("black-box")
    assert runs["none"]["epsilon_audit"]["audits"][-1]["tpr_at_1pct_fpr"] >= 0.5
    dp = {a["name"]: a for a in runs["dp-sgd"]["epsilon_audit"]["audits"]}
    thr, gauss = dp["one-run white-box (thresholded)"], dp["one-run Gaussian (asymptotic)"]
    claimed = runs["dp-sgd"]["claim"]["epsilon"]
    assert 0 < thr["epsilon_lb"] <= thr["ceiling"] and thr["epsilon_lb"] < claimed
    # read out of the real Opacus run (the canaries were records of it), not simulated
    assert thr["source"] == gauss["source"] == "recorded in training"
    assert runs["dp-sgd"]["training"]["white_box_canaries"] == 400
    # Gaussian: shown with its assumption, never evidence; here its regime diagnostics
    # hold, and it stays below the accountant's ε
    assert gauss["asymptotic"] and gauss["exceeds_claim"] is False
    assert "asymptotic" in gauss["assumption"]
    # 24 steps at q = 0.125: each present canary's count is a small binomial, so the
    # diagnostics may reject normality; the row is then "not applicable", never a number
    if gauss["regime"]["ok"]:
        assert gauss["status"] == "ok" and 0 < gauss["epsilon_lb"] < claimed
    else:
        assert gauss["status"] == "not_applicable" and "outside its regime" in gauss["reason"]
    assert runs["dp-sgd"]["epsilon_audit"]["status"] != "violated"
    # the report's comparison table: every audit with threat model, bound, ceiling, cost
    from privacy_audit.reports.html import render_html

    page = render_html(res)
    for needle in (
        "Threat model · cost",
        "one-run Gaussian (asymptotic)",
        "one-run white-box (thresholded)",
        "black-box: loss / log-probabilities",
        "simulated runs of the mechanism",
        "one training run",
        "signals recorded in training",
    ):
        assert needle in page, needle


def test_lm_designs_need_an_lm_target_and_bundled_lm_uses_new_token():
    raw = _raw()
    raw["target"] = {"preset": "tiny"}
    with pytest.raises(ConfigError, match="needs an LM target"):
        parse_config(raw)
    raw = _raw(repeat=0)
    with pytest.raises(ConfigError, match="canary_repeat"):
        parse_config(raw)
    assert load_config("lm").epsilon["canary_kind"] == "new-token"


@pytest.mark.slow
def test_new_token_canaries_on_a_users_base_lm(tmp_path):
    """target.model_dir = a local HF causal LM: the built-in trainer adds the new tokens
    to its tokenizer and embedding, trains, and the secret-part audit scores them."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from privacy_audit import fixtures

    texts = [r["text"].lower() for r in fixtures.load_corpus("private")[:200]]
    words = sorted({w for t in texts for w in t.split()})
    vocab = {w: i for i, w in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    hf.save_pretrained(str(tmp_path))
    cfg = GPT2Config(vocab_size=len(hf), n_positions=64, n_embd=32, n_layer=1, n_head=2)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).save_pretrained(str(tmp_path))
    raw = _raw()
    raw["target"] = {"model_dir": str(tmp_path), "max_length": 40}
    raw["defenses"] = [{"name": "none"}]
    raw["epsilon"]["white_box_canaries"] = 0
    raw["epsilon"]["canary_reference"] = True  # scores calibrated by the model before training
    run = run_audit(parse_config(raw), progress=False)["runs"][0]
    (ic,) = [a for a in run["epsilon_audit"]["audits"] if a["name"].startswith("input-canaries")]
    assert ic["status"] == "ok" and ic["design"] == "new-token"
    assert ic["score"] == "calibrated" and "before training" in ic["threat_model"]
    assert ic["epsilon_lb"] > 0.5 and ic["tpr_at_1pct_fpr"] >= 0.5


def test_gate_and_verdict_ignore_the_asymptotic_gaussian_bound():
    from privacy_audit.reports.epsilon_readout import epsilon_audit_bounds

    run = {
        "epsilon_audit": {
            "audits": [
                {"name": "one-run white-box (thresholded)", "status": "ok", "epsilon_lb": 0.9},
                {
                    "name": "one-run Gaussian (asymptotic)",
                    "status": "ok",
                    "epsilon_lb": 2.8,
                    "asymptotic": True,
                },
            ]
        }
    }
    assert epsilon_audit_bounds(run) == [("one-run white-box (thresholded)", 0.9)]
