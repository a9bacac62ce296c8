"""The modern LM attack battery on a causal LM that memorises its members, and on
members it never saw (two disjoint non-member sets): every membership signal is oriented
higher = member; untargeted extraction finds planted repeated sequences; PII extraction
reports extraction, reconstruction and inference against non-member baselines."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit import fixtures
from privacy_audit.attacks import ATTACKS
from privacy_audit.attacks.base import AttackContext, MetricSettings, run_attack, run_leakage_attack
from privacy_audit.attacks.extraction_untargeted import UntargetedExtraction
from privacy_audit.attacks.pii_extraction import PIIExtraction, find_pii, normalise
from privacy_audit.defenses.base import Examples, PrivacyClaim
from privacy_audit.targets.lm import LMRelease, build_lm_target, train_lm

pytestmark = pytest.mark.slow

N = 60
MAX_LEN = 128
SETTINGS = MetricSettings(n_boot=300)


def _examples(ids, texts, member: int) -> Examples:
    n = len(texts)
    return Examples(list(ids), list(texts), np.zeros(n, np.int64), members=np.full(n, member))


@pytest.fixture(scope="module")
def corpus():
    rows = fixtures.load_corpus("private")
    pub = fixtures.load_corpus("public")[:300]

    def take(rs, m):
        return _examples([r["id"] for r in rs], [r["text"] for r in rs], m)

    public = take(pub, 0)
    vocab = sorted({w for t in public.texts for w in t.lower().split() if w.isalpha()})
    rng = np.random.default_rng(5)
    planted = [" ".join(rng.choice(vocab, 16)) for _ in range(6)]  # 3 trained, 3 never
    return {
        "members": take(rows[:N], 1),
        "nonmembers": take(rows[N : 2 * N], 0),
        "strangers": take(rows[2 * N : 3 * N], 1),  # never trained on: a second non-member set
        "public": public,
        "planted": planted[:3],
        "unplanted": planted[3:],
    }


@pytest.fixture(scope="module")
def memorising(corpus):
    model, tok = build_lm_target("tiny-gpt2-word", seed=0)
    texts = corpus["members"].texts + corpus["planted"] * 10
    train_lm(model, tok, texts, epochs=30, batch_size=10, learning_rate=4e-3, max_length=MAX_LEN)
    return LMRelease(model, tok, MAX_LEN, PrivacyClaim.none())


def _auc(attack, release, members, nonmembers, public):
    if hasattr(attack, "prepare"):
        attack.prepare(public=public, seed=0)
    return run_attack(attack, release, members.concat(nonmembers), SETTINGS).metrics["auc"]


ATTACK_ARGS = {
    "lm-loss": {},
    "zlib": {},
    "min-k": {},
    "min-k++": {},
    "recall": {},
    "neighbourhood": {"neighbours": 4},
    "dc-pdd": {},
    "grad-norm": {},
}


@pytest.mark.parametrize("name", list(ATTACK_ARGS))
def test_membership_signal_detects_members_and_not_strangers(name, memorising, corpus):
    c = corpus
    auc = _auc(
        ATTACKS[name](**ATTACK_ARGS[name]), memorising, c["members"], c["nonmembers"], c["public"]
    )
    assert auc["value"] > 0.5 and auc["ci_low"] > 0.5, auc
    # the same model and attack on two disjoint sets it never trained on: chance
    ctrl = _auc(
        ATTACKS[name](**ATTACK_ARGS[name]), memorising, c["strangers"], c["nonmembers"], c["public"]
    )
    assert ctrl["ci_low"] <= 0.5 <= ctrl["ci_high"], ctrl


def test_shared_forward_pass_is_cached(memorising, corpus):
    texts = corpus["members"].texts[:5]
    first = memorising.token_stats(texts)
    calls = []
    hook = memorising.model.register_forward_hook(lambda *a: calls.append(1))
    try:
        for name in ("lm-loss", "zlib", "min-k", "min-k++", "dc-pdd"):
            a = ATTACKS[name]()
            if hasattr(a, "prepare"):
                a.prepare(public=corpus["public"], seed=0)
            a.score(memorising, corpus["members"].subset(range(5)))
    finally:
        hook.remove()
    assert calls == []  # every one of them read the cached TokenStats
    assert memorising.token_stats(texts)[0] is first[0]


def test_lowercase_is_an_error_on_a_lowercasing_tokenizer(memorising, corpus):
    r = None
    with pytest.raises(ValueError, match="lowercases"):
        r = ATTACKS["lowercase"]().score(memorising, corpus["members"].subset(range(4)))
    assert r is None


@pytest.fixture(scope="module")
def char_model(corpus):
    texts = [t[:70] for t in corpus["members"].texts[:30]]
    model, tok = build_lm_target("tiny-gpt2", seed=0)
    train_lm(model, tok, texts, epochs=60, batch_size=10, learning_rate=4e-3, max_length=80)
    return LMRelease(model, tok, 80, PrivacyClaim.none()), texts


def test_lowercase_ratio_on_a_case_sensitive_memorising_lm(char_model, corpus):
    release, texts = char_model
    members = _examples(range(30), texts, 1)
    non = _examples(range(30), [t[:70] for t in corpus["nonmembers"].texts[:30]], 0)
    strangers = _examples(range(30), [t[:70] for t in corpus["strangers"].texts[:30]], 1)
    auc = _auc(ATTACKS["lowercase"](), release, members, non, None)
    assert auc["ci_low"] > 0.5, auc
    ctrl = _auc(ATTACKS["lowercase"](), release, strangers, non, None)
    assert ctrl["ci_low"] <= 0.5 <= ctrl["ci_high"], ctrl


def test_untargeted_extraction_finds_planted_sequences_and_nothing_unseen(memorising, corpus):
    c = corpus
    attack = UntargetedExtraction(samples=40, new_tokens=24, min_tokens=8, top=20)

    def run(planted):
        members = _examples(range(3), planted, 1)
        ctx = AttackContext(members, c["nonmembers"], c["public"], None, SETTINGS, 0)
        return run_leakage_attack(attack, memorising, ctx)

    hit, control = run(c["planted"]), run(c["unplanted"])
    assert hit.status == "ok" and control.status == "ok"
    assert hit.metrics["extracted_rate"]["ci_low"] > 0
    assert hit.details["distinct_extracted"] >= 1
    for r in ("perplexity", "zlib", "reference"):
        m = hit.metrics[f"precision_top_{r}"]
        assert m["n"] == 20 and m["ci_low"] is not None and m["value"] > 0
    assert "lowercase" in hit.details["rankings_skipped"]  # word tokenizer lowercases
    assert control.metrics["extracted_rate"]["value"] == 0  # nothing it never saw
    assert all(s["matched"] in " ".join(c["planted"]) for s in hit.samples)
    assert hit.to_dict(aggregate_only=True)["samples"] == []


def test_find_pii_patterns():
    text = (
        "Hi, my name is Ada Lovelace. Mail ada.l@example-mail.com or call 555-012-3456. Bo Li here"
    )
    got = [(k, s) for k, _, s in find_pii(text, ["Lovelace"])]
    assert ("name", "Ada Lovelace") in got and ("name", "Bo Li") in got
    assert ("email", "ada.l@example-mail.com") in got and ("phone", "555-012-3456") in got
    assert ("user", "Lovelace") in got
    assert normalise("ada. l @ example- mail. com") == normalise("ada.l@example-mail.com")


def test_pii_extraction_three_measures_against_baselines(memorising, corpus):
    c = corpus
    ctx = AttackContext(c["members"], c["nonmembers"], c["public"], None, SETTINGS, 0)
    r = run_leakage_attack(PIIExtraction(samples=60, new_tokens=40), memorising, ctx)
    assert r.status == "ok", r.reason
    for m in ("extraction_rate", "reconstruction_rate", "inference_accuracy"):
        for key in (m, m + "_baseline"):
            e = r.metrics[key]
            assert e["ci_low"] <= e["value"] <= e["ci_high"] and e["n"] > 0
    rec, inf = r.metrics["reconstruction_rate"], r.metrics["inference_accuracy"]
    assert rec["ci_low"] > r.metrics["reconstruction_rate_baseline"]["ci_high"]
    assert inf["ci_low"] > r.metrics["inference_accuracy_baseline"]["value"]
    assert r.samples and all("pii" in s for s in r.samples)
    assert r.to_dict(aggregate_only=True)["samples"] == []


def test_batched_sampler_agrees_with_generate_ids(memorising):
    from privacy_audit.attacks.extraction_untargeted import sample_unprompted

    # top-1 sampling is greedy decoding: the cached batch sampler must match generate_ids
    greedy = memorising.generate_ids([""], 20, greedy=True)[0]
    assert sample_unprompted(memorising, 3, 20, top_k=1, temperature=1.0, seed=0) == [greedy] * 3
    a = sample_unprompted(memorising, 4, 12, top_k=40, temperature=1.0, seed=1)
    assert a == sample_unprompted(memorising, 4, 12, top_k=40, temperature=1.0, seed=1)
    assert len({tuple(x) for x in a}) > 1  # sampled, not greedy
