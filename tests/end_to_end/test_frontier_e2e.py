"""End to end, saved models -> CLI -> results.json, for every reference-based attack
(issue 33): the per-example scores of ``reference``, ``ez-mia``, ``informia``,
``lira-offline`` and ``rmia-offline`` (a given base as the reference) and of
``rmia-online`` (references the suite fine-tunes) equal an independent computation from
plain ``transformers`` forward passes on ``tokenizer(text)`` and numpy / scipy.

Replacing the target's probabilities by the references' mean in
``audit/scale/tasks.py`` (the task that feeds ``rmia_scores``) fails the RMIA tests here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.own_models import (
    build_causal_lm,
    fine_tune,
    random_texts,
    save,
    word_tokenizer,
    write_lines,
)

N = 20  # members and non-members each


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("frontier")
    tok = word_tokenizer()
    members, nonmembers = random_texts(N, 21, length=10), random_texts(N, 22, length=10)
    write_lines(root / "members.txt", members)
    write_lines(root / "nonmembers.txt", nonmembers)
    write_lines(root / "population.txt", random_texts(12, 23, length=10))
    base = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    fine_tune(base, tok, random_texts(60, 24, length=10), epochs=3)  # a "pretrained" base
    save(base, tok, root / "base")
    target = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    target.load_state_dict(base.state_dict())
    fine_tune(target, tok, members, epochs=12)
    save(target, tok, root / "target")
    return root


def _plain(path: Path, texts: list[str]) -> list[dict[str, np.ndarray]]:
    """Per text, from plain transformers on tokenizer(text): log p(x_t | x_<t), the
    top-1 token and the target ids of every predicted position."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    out = []
    with torch.no_grad():
        for t in texts:
            ids = tok(t, return_tensors="pt")["input_ids"]
            logits = model(input_ids=ids).logits[0, :-1].double()
            lp = torch.log_softmax(logits, -1)
            tgt = ids[0, 1:]
            out.append(
                {
                    "lp": lp.gather(-1, tgt[:, None])[:, 0].numpy(),
                    "top1": logits.argmax(-1).numpy(),
                    "ids": tgt.numpy(),
                }
            )
    return out


def _run(cli, cfg_text: str, tmp_path: Path) -> dict:
    cfg = tmp_path / "audit.toml"
    cfg.write_text(cfg_text, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _scores(run: dict, name: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    a = next(x for x in run["attacks"] if x["attack"] == name)
    assert a["status"] == "ok", a
    ex = a["examples"]
    texts = [run["example_texts"][i] for i in ex["ids"]]
    return np.asarray(ex["scores"]), texts, np.asarray(ex["members"])


def _rmia(ratio: np.ndarray, z_ratio: np.ndarray) -> np.ndarray:
    """RMIA with γ = 1: the fraction of population samples whose ratio x's exceeds."""
    return np.array([(z_ratio < r).mean() for r in ratio])


def test_given_base_reference_attacks_equal_plain_transformers(models, tmp_path, cli):
    """``run`` on a fine-tune with its base as the one reference and no [attacks] names:
    the default battery (item 4), every reference attack's per-example scores recomputed."""
    from scipy.stats import norm

    root = models
    res = _run(
        cli,
        f'[target]\naudit_dir = "{root / "target"}"\nreference_dirs = ["{root / "base"}"]\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n',
        tmp_path,
    )
    run = res["runs"][0]
    names = [a["attack"] for a in run["attacks"]]
    assert names == [
        "lm-loss",
        "zlib",
        "min-k",
        "min-k++",
        "reference",
        "ez-mia",
        "informia",
        "lira-offline",
        "rmia-offline",
    ]
    _, texts, members = _scores(run, "reference")
    tgt, ref = _plain(root / "target", texts), _plain(root / "base", texts)
    t_nll = np.array([-x["lp"].mean() for x in tgt])
    r_nll = np.array([-x["lp"].mean() for x in ref])

    got, _, _ = _scores(run, "reference")
    np.testing.assert_allclose(got, r_nll - t_nll, rtol=1e-6, atol=1e-9)

    got, _, _ = _scores(run, "ez-mia")
    # both models are float32: each log p is within b = u (2 + K + log V) of float64
    # (targets/logit_stats.py), so each error-zone difference d within 2b, and P / N
    # (P, N: the sums of d > 0 and of -d over d < 0, m error-zone positions; a d within 2b
    # of 0 may change sides) within 2 b m (1 + P / N) / N to first order
    from transformers import AutoConfig

    from privacy_audit.targets.logit_stats import U32, summed_terms

    vocab = AutoConfig.from_pretrained(root / "target").vocab_size
    b = U32 * (2 + summed_terms(vocab, torch.float32) - 1 + np.log(vocab))
    expect, tol = [], []
    for t, r in zip(tgt, ref, strict=True):
        err = t["top1"] != t["ids"]
        err[0] = False  # the first predicted position is ignored
        d = (t["lp"] - r["lp"])[err]
        neg = -d[d < 0].sum()
        ratio = 0.0 if err.sum() < 2 or neg == 0 else d[d > 0].sum() / neg
        expect.append(ratio)
        tol.append(2 * b * err.sum() * (1 + ratio) / neg if neg > 0 else 0.0)
    expect, tol = np.array(expect), np.array(tol)
    assert np.all(np.abs(np.asarray(got) - expect) <= 1.01 * tol + 1e-9)
    assert float(np.median(tol / np.maximum(expect, 1e-12))) < 1e-3  # the bound is not vacuous
    assert 0 < np.count_nonzero(expect) < len(expect)  # both branches of the definition

    got, _, _ = _scores(run, "informia")
    bits = [(t["lp"] - r["lp"]) / np.log(2) for t, r in zip(tgt, ref, strict=True)]
    g_pop = np.concatenate(bits).mean()  # population = the audited texts, unlabelled
    np.testing.assert_allclose(got, [np.sum(b - g_pop) for b in bits], rtol=1e-6, atol=1e-8)

    # LiRA offline, one OUT reference: log Pr[Z <= φ_t], Z ~ N(φ_ref, 1) (one model: σ = 1)
    phi = lambda nll: -nll - np.log(-np.expm1(-nll))  # noqa: E731
    got, _, _ = _scores(run, "lira-offline")
    np.testing.assert_allclose(got, norm.logcdf(phi(t_nll), phi(r_nll), 1.0), rtol=1e-6)

    # RMIA offline with the LM default a = 1: p(x) = p_ref(x); z = the audited texts
    got, _, _ = _scores(run, "rmia-offline")
    ratio = np.exp(-t_nll) / np.exp(-r_nll)
    np.testing.assert_allclose(got, _rmia(ratio, ratio), atol=1e-12)
    assert run["target"]["references"]["rmia_offline_a"] == 1.0

    # the verdict names the strongest attack two ways
    assert run["strongest_attack_by_auc"] in names
    low = run["strongest_attack_low_fpr"]
    assert low is None or low["attack"] in names  # 20 non-members resolve no reported FPR
    assert "by AUC, it is " + run["strongest_attack_by_auc"] in run["verdict"]["text"]


def test_rmia_online_equals_plain_transformers(models, tmp_path, cli):
    """Online RMIA against two references the suite fine-tunes from the base: the target's
    probability from plain transformers, the references' from their task results."""
    root = models
    res = _run(
        cli,
        f'[target]\naudit_dir = "{root / "target"}"\n'
        f'[shadow]\nn_models = 2\nbase_dir = "{root / "base"}"\nepochs = 1\nlora_rank = 2\n'
        f'population = "{root / "population.txt"}"\nattacks = ["rmia-online", "rmia-offline"]\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n'
        '[attacks]\nnames = ["lm-loss"]\n',
        tmp_path,
    )
    run = res["runs"][0]
    got, texts, _ = _scores(run, "rmia-online")
    pop = [t for t in (root / "population.txt").read_text().split("\n") if t.strip()]
    pool = texts + pop
    tasks = sorted((tmp_path / "out" / "run" / "tasks").glob("*.json"))
    ref_loss = np.array([json.loads(p.read_text())["loss"] for p in tasks])
    assert ref_loss.shape == (2, len(pool))
    t_nll = np.array([-x["lp"].mean() for x in _plain(root / "target", pool)])
    ratio = np.exp(-t_nll) / np.exp(-ref_loss).mean(0)  # online: all references
    expect = _rmia(ratio[: len(texts)], ratio[len(texts) :])
    np.testing.assert_allclose(got, expect, atol=1e-12)
    assert 0 < expect.min() < expect.max()  # the scores are not all tied
