"""Known answers for the 2026 frontier attacks (issue 33): EZ-MIA, InfoRMIA, Con-ReCall,
SaMIA and zlib as cited, each against an independent computation (a hand example, the
published definition written out here in torch / numpy, or plain ``transformers``).

Mutation record (each one-line change made once in the attack module, the tests below
run, the change reverted): see docs/frontier.md, "Mutation checks"."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from privacy_audit.defenses.base import Examples, PrivacyClaim, TokenStats


# --------------------------------------------------------------------------- #
# EZ-MIA
# --------------------------------------------------------------------------- #
def _published_ez(tgt_lp, ref_lp, top1, ids, min_tokens=2):
    """The authors' ``error_zone_pos_neg_sum_ratio`` written from its published
    definition (one sequence, no padding, BOS position ignored), in torch."""
    tgt_lp, ref_lp = torch.as_tensor(tgt_lp), torch.as_tensor(ref_lp)
    mask = torch.ones(tgt_lp.numel())
    mask[0] = 0.0  # ignore_bos
    err = (torch.as_tensor(top1) != torch.as_tensor(ids)) & (mask > 0.5)
    if int(err.sum()) < min_tokens:
        return 0.0
    d = (tgt_lp - ref_lp)[err]
    pos, neg = d[d > 0].sum(), d[d < 0].abs().sum()
    if float(neg) == 0.0:
        return 0.0
    v = float(pos / (neg + 1e-12))
    return v if v == v and v >= 0 else 0.0


def test_ez_mia_hand_example():
    from privacy_audit.attacks.ez_mia import error_zone_ratio

    ids = np.array([5, 6, 7, 8, 9, 4])
    top1 = np.array([1, 6, 2, 3, 9, 0])  # wrong at 0 (ignored), 2, 3, 5
    tgt = np.array([-9.0, -1.0, -2.0, -3.0, -0.5, -4.0])
    ref = np.array([-1.0, -5.0, -3.0, -2.0, -0.7, -4.5])
    # error zone: positions 2, 3, 5; deltas +1.0, -1.0, +0.5 -> 1.5 / 1.0
    assert error_zone_ratio(tgt, ref, top1, ids) == pytest.approx(1.5, abs=1e-12)
    # the first position's huge negative shift never counts (BOS handling)
    assert error_zone_ratio(tgt, ref, top1, ids, ignore_first=False) == pytest.approx(
        1.5 / 9.0, abs=1e-12
    )


def test_ez_mia_edge_cases():
    from privacy_audit.attacks.ez_mia import error_zone_ratio

    ids = np.array([1, 2, 3, 4])
    # one error position after the first: fewer than min_tokens = 2 -> 0
    assert error_zone_ratio([-1.0] * 4, [-2.0] * 4, [9, 2, 9, 4], ids) == 0.0
    # two error positions, no negative shift -> 0
    assert error_zone_ratio([-1.0] * 4, [-2.0] * 4, [9, 9, 9, 4], ids) == 0.0
    # only the (ignored) first position is an error -> 0
    assert error_zone_ratio([-1.0, -3, -3, -3], [-2.0] * 4, [9, 2, 3, 4], ids) == 0.0
    # an empty text -> 0
    assert error_zone_ratio([], [], [], []) == 0.0


def test_ez_mia_matches_the_published_definition_on_random_tensors():
    from privacy_audit.attacks.ez_mia import ez_scores

    rng = np.random.default_rng(0)
    target, reference, expect = [], [], []
    for _ in range(300):
        t = int(rng.integers(1, 30))
        ids = rng.integers(0, 6, size=t)
        top1 = np.where(rng.random(t) < 0.4, ids, rng.integers(0, 6, size=t))
        tlp = -rng.exponential(2.0, size=t)
        rlp = tlp - rng.normal(0.3, 1.0, size=t) * (rng.random(t) < 0.9)
        z = np.zeros(t)
        target.append(TokenStats(ids, tlp, z, z, top1_ids=top1))
        reference.append(TokenStats(ids, rlp, z, z))
        expect.append(_published_ez(tlp, rlp, top1, ids))
    got = ez_scores(target, reference)
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)
    assert np.count_nonzero(got) > 150 and np.count_nonzero(got == 0) > 5  # both regimes


def test_ez_mia_refuses_mismatched_tokens():
    from privacy_audit.attacks.ez_mia import ez_scores

    z = np.zeros(3)
    t = TokenStats(np.array([1, 2, 3]), z - 1, z, z, top1_ids=np.array([0, 0, 0]))
    r = TokenStats(np.array([1, 2, 4]), z - 2, z, z)
    with pytest.raises(ValueError, match="different token sequence"):
        ez_scores([t], [r])


# --------------------------------------------------------------------------- #
# InfoRMIA
# --------------------------------------------------------------------------- #
def test_informia_known_answer_on_random_statistics():
    from privacy_audit.attacks.informia import informia_scores, population_gain, token_gains

    rng = np.random.default_rng(1)
    tgt, ref = [], []
    for _ in range(50):
        t = int(rng.integers(2, 20))
        ids = rng.integers(0, 9, size=t)
        z = np.zeros(t)
        tgt.append(TokenStats(ids, -rng.exponential(2, t), z, z))
        ref.append(TokenStats(ids, -rng.exponential(2, t), z, z))
    gains = token_gains(tgt, ref)
    got = informia_scores(gains, population_gain(gains))
    # independent: bits = nats / ln 2; population mean over all tokens of all texts
    all_t = np.concatenate([s.log_probs for s in tgt])
    all_r = np.concatenate([s.log_probs for s in ref])
    g_pop = np.mean((all_t - all_r) / np.log(2))
    expect = [
        np.sum((a.log_probs - b.log_probs) / np.log(2) - g_pop)
        for a, b in zip(tgt, ref, strict=True)
    ]
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------- #
# zlib as cited, and the old variant under its own name
# --------------------------------------------------------------------------- #
def test_zlib_is_log_perplexity_over_zlib_entropy():
    from privacy_audit.attacks.llm_membership import zlib_scores, zlib_total_scores

    texts = ["the cat sat on the mat", "aaaa aaaa aaaa aaaa aaaa aaaa aaaa"]
    logp = [np.array([-1.0, -2.0, -3.0]), np.array([-0.5, -0.25, -0.25, -1.0])]
    # Carlini et al. 2021 / MIMIR: loss (mean NLL) / len(zlib.compress(bytes(text, "utf-8")))
    expect = [
        -2.0 / len(zlib.compress(texts[0].encode())),
        -0.5 / len(zlib.compress(texts[1].encode())),
    ]
    np.testing.assert_allclose(zlib_scores(logp, texts), expect, rtol=1e-12)
    old = [
        -6.0 / np.log(2) / (8 * len(zlib.compress(texts[0].encode()))),
        -2.0 / np.log(2) / (8 * len(zlib.compress(texts[1].encode()))),
    ]
    np.testing.assert_allclose(zlib_total_scores(logp, texts), old, rtol=1e-12)


# --------------------------------------------------------------------------- #
# Con-ReCall
# --------------------------------------------------------------------------- #
def test_con_recall_formula_hand_example():
    from privacy_audit.attacks.con_recall import con_recall_score

    # members: the member prefix helps (-1.0), the non-member one hurts (-3.0)
    got = con_recall_score([-3.0, -2.0], [-1.0, -2.0], [-2.0, -2.0], gamma=0.5)
    np.testing.assert_allclose(got, [(-3.0 + 0.5) / -2.0, (-2.0 + 1.0) / -2.0], rtol=1e-12)
    assert got[0] > got[1]  # higher = member


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from tests.own_models import build_causal_lm, random_texts, word_tokenizer

    tok = word_tokenizer()
    model = build_causal_lm("gpt2", len(tok), seed=3, d=32).eval()
    return model, tok, random_texts(12, 5, length=6)


def _release(model, tok, max_length=64):
    from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

    return HFLMRelease(model, HFTokenizer(tok), max_length, PrivacyClaim.none("t"), batch_size=4)


def _plain_mean_ll(model, tok, text: str, skip: int) -> float:
    """Mean log p of the tokens after the first ``skip`` ids of ``tokenizer(text)``."""
    ids = tok(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].double(), -1)
    tgt = ids[0, 1:]
    per = lp.gather(-1, tgt[:, None])[:, 0]
    return float(per[max(skip - 1, 0) :].mean())


def test_con_recall_equals_plain_transformers(tiny_lm):
    from privacy_audit.attacks.con_recall import ConRecallAttack

    model, tok, texts = tiny_lm
    members = np.r_[np.ones(6), np.zeros(6)].astype(int)
    ex = Examples([str(i) for i in range(12)], texts, np.zeros(12, int), members)
    att = ConRecallAttack(shots=2)
    att.prepare(public=None, seed=0)
    got = att.score(_release(model, tok), ex)
    mem_pool, non_pool = att.prefix_pools(ex)
    expect, unconditional = [], []
    for t in texts:
        ll = {}
        for key, pool in (("mem", mem_pool), ("non", non_pool)):
            prefix = " ".join([p for p in pool if p != t][:2])
            n_pre = len(tok(prefix)["input_ids"])
            ll[key] = _plain_mean_ll(model, tok, prefix + " " + t, n_pre)
        unc = _plain_mean_ll(model, tok, t, 0)
        unconditional.append(unc)
        expect.append((ll["non"] - 0.5 * ll["mem"]) / unc)
    # the float32 model's log p is within b = u (2 + K + log V) of float64
    # (targets/logit_stats.py), so is each mean; the ratio (a - b / 2) / c then
    # within (1.5 b + |ratio| b) / |c| to first order
    from privacy_audit.targets.logit_stats import U32, summed_terms

    b = U32 * (2 + summed_terms(len(tok), torch.float32) - 1 + np.log(len(tok)))
    expect, unconditional = np.array(expect), np.abs(unconditional)
    assert np.all(
        np.abs(np.asarray(got) - expect) <= 1.01 * (1.5 + np.abs(expect)) * b / unconditional
    )
    # leave one out: a member drawn into the prefix pool is not conditioned on itself
    assert any(t in mem_pool for t in texts)


# --------------------------------------------------------------------------- #
# SaMIA
# --------------------------------------------------------------------------- #
def test_rouge1_recall_hand_example():
    from privacy_audit.attacks.samia import rouge1_recall, split_prefix

    assert rouge1_recall("a b b c".split(), "b b b d".split()) == pytest.approx(2 / 4)
    assert rouge1_recall([], ["a"]) == 0.0
    assert split_prefix("one two three four five", 0.5) == ("one two", ["three", "four", "five"])


class _FakeGenerator:
    """A release that 'generates' fixed continuations: the test knows every sample."""

    def __init__(self, outputs):
        from privacy_audit.targets.scoring import HFTokenizer
        from tests.own_models import word_tokenizer

        self.tokenizer = HFTokenizer(word_tokenizer())
        self.outputs = outputs
        self.calls = []

    def generate_ids(self, prompts, max_new_tokens, greedy, temperature, top_k, seed):
        self.calls.append((list(prompts), max_new_tokens, greedy, temperature, top_k))
        return [self.tokenizer.token_ids(self.outputs[p]) for p in prompts]


def test_samia_known_answer_with_fixed_samples():
    from privacy_audit.attacks.samia import SaMIAAttack
    from tests.own_models import WORDS

    w = WORDS
    texts = [" ".join(w[0:4]), " ".join(w[4:8])]
    outputs = {
        # the member's own suffix and one word more: recall 1 (precision would be 2/3)
        " ".join(w[0:2]): " ".join([w[2], w[3], w[11]]),
        " ".join(w[4:6]): w[7],  # half of it: recall 0.5 (precision would be 1)
    }
    fake = _FakeGenerator(outputs)
    ex = Examples(["a", "b"], texts, np.zeros(2, int), np.array([1, 0]))
    got = SaMIAAttack(samples=3).score(fake, ex)
    np.testing.assert_allclose(got, [1.0, 0.5])
    prompts, n_new, greedy, temp, top_k = fake.calls[0]
    assert len(prompts) == 6 and not greedy and temp == 1.0 and top_k == 50 and n_new == 2
    z = SaMIAAttack(samples=1, zlib=True).score(fake, ex)
    expect = [
        1.0 * len(zlib.compress(outputs[" ".join(w[0:2])].encode())),
        0.5 * len(zlib.compress(outputs[" ".join(w[4:6])].encode())),
    ]
    np.testing.assert_allclose(z, expect)


def test_samia_runs_on_a_real_generating_release(tiny_lm):
    from privacy_audit.attacks.samia import SaMIAAttack

    model, tok, texts = tiny_lm
    ex = Examples([str(i) for i in range(4)], texts[:4], np.zeros(4, int), np.array([1, 1, 0, 0]))
    a = SaMIAAttack(samples=2)
    a.prepare(seed=0)
    s1, s2 = a.score(_release(model, tok), ex), a.score(_release(model, tok), ex)
    assert s1.shape == (4,) and np.all((s1 >= 0) & (s1 <= 1))
    np.testing.assert_array_equal(s1, s2)  # same seed, same samples


def test_new_attacks_declare_threat_model_and_cost():
    from privacy_audit.attacks import ATTACKS
    from privacy_audit.attacks.base import Attack

    vocab = {
        "reference",
        "population",
        "member-prefixes",
        "nonmember-prefixes",
        "generation",
        "gradients",
        "labels",
    }
    assert Attack.summary == "" and Attack.needs == () and Attack.cost == ""
    for name in ("ez-mia", "informia", "con-recall", "samia", "zlib", "zlib-total"):
        cls = ATTACKS[name]
        assert cls.summary and cls.cost, name
        assert set(cls.needs) <= vocab, name
    assert ATTACKS["ez-mia"].needs == ("reference",)
    assert ATTACKS["samia"].needs == ("generation",)
    assert set(ATTACKS["con-recall"].needs) == {"member-prefixes", "nonmember-prefixes"}


@pytest.mark.parametrize(
    "table, needle",
    [
        ("[attacks.options.samia]\nsamples = 0\n", "samia samples must be at least 1"),
        ("[attacks.options.con-recall]\ngamma = -1.0\n", "con-recall gamma"),
        ("[attacks.options.samia]\nprefix = 0.5\n", "allowed: prefix_ratio"),
    ],
)
def test_bad_attack_options_exit_2_before_any_work(table, needle, tmp_path, cli):
    cfg = tmp_path / "audit.toml"
    cfg.write_text('[attacks]\nnames = ["samia", "con-recall"]\n' + table, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 2, outcome.stderr[-2000:]
    lines = [ln for ln in outcome.stderr.splitlines() if ln.startswith("privacy-audit")]
    assert len(lines) == 1 and needle in lines[0], outcome.stderr
    assert not out.exists()


def test_bench_frontier_tables_and_ratio_interval():
    """The ratio's bootstrap interval brackets the point value; the table renders every
    attack with both TPRs (values from a hand-made bench record)."""
    from privacy_audit.audit.benchmarks.frontier import markdown_tables, tpr_ratio_interval

    rng = np.random.default_rng(0)
    m = np.r_[np.ones(400), np.zeros(400)].astype(int)
    a = rng.normal(m * 2.0, 1.0)
    b = rng.normal(m * 1.0, 1.0)
    r = tpr_ratio_interval(a, b, m, 0.01, 300, 0)
    assert r["ratio"] is not None and r["ci_low"] <= r["ratio"] <= r["ci_high"]
    metric = {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    rec = {
        "setup": {
            "n_members": 400,
            "n_nonmembers": 400,
            "cases": {
                "gpt2 full": {
                    "attacks": {
                        "ez-mia": {
                            "auc": metric,
                            "tpr_at_fpr_0.01": metric,
                            "tpr_at_fpr_0.001": {"value": None},
                        }
                    },
                    "ez_mia_tpr_ratio": {"ez-mia / lm-loss": r},
                }
            },
        }
    }
    text = markdown_tables(rec)
    assert "| `ez-mia` | 0.500 [0.400, 0.600] | 50.0% [40.0, 60.0] | not resolvable |" in text
    assert "ez-mia / lm-loss" in text


def _att(name, auc, auc_ci, tpr1, tpr1_ci, tpr01=None, n_out=3000):
    def tpr(v, c):
        if v is None:
            return {"value": None, "ci_low": None, "ci_high": None, "below_resolution": True}
        return {"value": v, "ci_low": c[0], "ci_high": c[1], "below_resolution": False}

    return {
        "attack": name,
        "status": "ok",
        "n_members": n_out,
        "n_nonmembers": n_out,
        "metrics": {
            "auc": {"value": auc, "ci_low": auc_ci[0], "ci_high": auc_ci[1]},
            "tpr_at_fpr_0.01": tpr(tpr1, tpr1_ci),
            "tpr_at_fpr_0.001": tpr(*(tpr01 or (None, None))),
        },
    }


def test_strongest_attack_leads_with_the_lowest_resolvable_fpr():
    from privacy_audit.audit.results import pick_strongest

    hi_auc = _att("min-k", 0.80, (0.78, 0.82), 0.05, (0.04, 0.07), (0.002, (0.0, 0.01)))
    hi_tpr = _att("ez-mia", 0.75, (0.73, 0.77), 0.30, (0.27, 0.33), (0.10, (0.08, 0.12)))
    p = pick_strongest([hi_auc, hi_tpr])
    assert p["attack"] == "ez-mia" and p["by_auc"] == "min-k"
    assert p["low_fpr"]["fpr"] == 0.001 and p["low_fpr"]["tpr"] == 0.10
    # 0.1% not resolved (< 1,000 non-members): 1% decides
    a = _att("a", 0.7, (0.6, 0.8), 0.2, (0.1, 0.3))
    b = _att("b", 0.9, (0.8, 0.95), 0.1, (0.05, 0.2))
    p = pick_strongest([a, b])
    assert (p["attack"], p["by_auc"], p["low_fpr"]["fpr"]) == ("a", "b", 0.01)
    # the report's rule (reports/resolution.py): 0.1% at 2,000 non-members rests on 2 false
    # positives, 1% at 150 on 1.5; a 1% interval wider than 0.5 resolves nothing either
    few = [
        _att("m", 0.80, (0.78, 0.82), 0.05, (0.04, 0.07), (0.002, (0.0, 0.01)), n_out=2000),
        _att("e", 0.75, (0.73, 0.77), 0.30, (0.27, 0.33), (0.10, (0.08, 0.12)), n_out=2000),
    ]
    p = pick_strongest(few)
    assert (p["attack"], p["low_fpr"]["fpr"], p["low_fpr"]["tpr"]) == ("e", 0.01, 0.30)
    tiny = [_att("t", 0.7, (0.6, 0.8), 0.09, (0.0, 0.18), n_out=150)]
    assert pick_strongest(tiny)["low_fpr"] is None
    wide = [_att("w", 0.7, (0.6, 0.8), 0.30, (0.05, 0.70), n_out=600)]
    assert pick_strongest(wide)["low_fpr"] is None
    # no reported FPR resolved: the AUC leader
    c = _att("c", 0.6, (0.5, 0.7), None, None)
    assert pick_strongest([c]) == {"attack": "c", "by_auc": "c", "low_fpr": None}
    assert pick_strongest([])["attack"] is None


def test_verdict_reads_the_more_severe_of_the_two_strongest():
    from privacy_audit.audit.results import pick_strongest
    from privacy_audit.reports.verdict import verdict_for_run, verdict_level

    # the low-FPR leader alone would read LOW; the AUC leader reads HIGH
    low_fpr = _att("x", 0.52, (0.49, 0.55), 0.04, (0.02, 0.045), (0.03, (0.01, 0.04)))
    by_auc = _att("y", 0.70, (0.68, 0.72), 0.03, (0.02, 0.04), (0.0, (0.0, 0.005)))
    run = {"name": "r", "attacks": [low_fpr, by_auc], "claim": {"notion": "none"}}
    p = pick_strongest(run["attacks"])
    run.update(
        strongest_attack=p["attack"],
        strongest_attack_by_auc=p["by_auc"],
        strongest_attack_low_fpr=p["low_fpr"],
    )
    assert p["attack"] == "x" and p["by_auc"] == "y"
    assert verdict_level(run)[0] == "high"  # never LOW from the low-FPR leader alone
    v = verdict_for_run(run)
    assert v["attack"] == "y"
    assert (
        "At 0.1% false positives, the lowest reported rate this sample resolves, the "
        "strongest attack is x" in v["text"]
    )
    assert "by AUC, it is y" in v["text"]
