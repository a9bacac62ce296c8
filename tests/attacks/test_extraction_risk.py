"""Extraction risk at the product's decoding settings (issue 28).

Known answers: hand-computed warped distributions (temperature, ties at the top-k cut,
the top-p cut, top-p = 1, top-k = 1 = greedy), and the closed form against Monte Carlo
sampling from ``model.generate(do_sample=True, ...)`` on a small memorising model.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privacy_audit.attacks.extraction_risk import log1mexp, median_interval, risk_within
from privacy_audit.targets.decoding import Decoding, ExtractionSpec
from tests.own_models import build_causal_lm, random_texts, word_tokenizer


def _softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def _probs(dec: Decoding, logits) -> np.ndarray:
    lg = torch.tensor(np.asarray([logits], dtype=np.float32))
    v = lg.shape[1]
    lp = dec.log_probs(lg.repeat(v, 1), torch.arange(v))
    return np.exp(lp.numpy())


# --------------------------------------------------------------------------- #
# the warped distribution, by hand
# --------------------------------------------------------------------------- #
def test_temperature_divides_the_logits():
    logits = [2.0, 1.0, 0.5, -1.0]
    got = _probs(Decoding(temperature=0.5, top_k=0, top_p=1.0), logits)
    np.testing.assert_allclose(got, _softmax(np.array(logits) / 0.5), rtol=1e-6)


def test_top_k_keeps_every_token_tied_at_the_cut():
    # k = 2: the 2nd largest logit (2.0) is shared by tokens 1 and 2; both survive
    logits = [3.0, 2.0, 2.0, 1.0, 0.0]
    got = _probs(Decoding(temperature=1.0, top_k=2, top_p=1.0), logits)
    want = np.zeros(5)
    want[:3] = _softmax([3.0, 2.0, 2.0])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert got[3] == 0.0 and got[4] == 0.0


def test_top_p_cut_by_hand():
    # p = [0.5, 0.3, 0.15, 0.05]; ascending cumulative 0.05, 0.2, 0.5, 1.0; top_p = 0.75
    # removes the tokens whose cumulative mass is <= 0.25: the 0.05 and the 0.15
    logits = np.log([0.5, 0.3, 0.15, 0.05])
    got = _probs(Decoding(temperature=1.0, top_k=0, top_p=0.75), logits)
    np.testing.assert_allclose(got, [0.625, 0.375, 0.0, 0.0], rtol=1e-5, atol=0)


def test_top_p_tie_at_the_cut_removes_exactly_the_mass_below_it():
    # four equal tokens, top_p = 0.5: two are removed (cumulative 0.25, 0.5 <= 0.5), the
    # other two share the mass; which two is torch.sort's order, as in generation
    got = _probs(Decoding(temperature=1.0, top_k=0, top_p=0.5), [1.0, 1.0, 1.0, 1.0])
    assert sorted(np.round(got, 6).tolist()) == [0.0, 0.0, 0.5, 0.5]


def test_top_p_one_and_top_k_zero_are_plain_sampling():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=50) * 3
    got = _probs(Decoding(temperature=1.0, top_k=0, top_p=1.0), logits)
    np.testing.assert_allclose(got, _softmax(logits), rtol=1e-5)


def test_top_k_one_is_greedy():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=30)
    got = _probs(Decoding(temperature=0.7, top_k=1, top_p=0.9), logits)
    want = np.zeros(30)
    want[int(np.argmax(logits))] = 1.0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(temperature=0.0), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(top_k=-1), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
    ],
)
def test_bad_decoding_is_refused(kw, word):
    with pytest.raises(ValueError, match=word):
        Decoding(**kw)


# --------------------------------------------------------------------------- #
# risk within n queries
# --------------------------------------------------------------------------- #
def test_risk_within_n_is_stable_at_both_ends():
    import mpmath

    mpmath.mp.dps = 400  # 1 - (1 - 1e-300)^n needs 300+ digits
    for p in (0.3, 1e-3, 1e-12, 1e-300):
        for n in (1, 10, 100, 1000):
            got = risk_within(np.array([math.log(p)]), n)[0]
            want = float(1 - (1 - mpmath.mpf(p)) ** n)
            assert got == pytest.approx(want, rel=1e-9), (p, n)
    assert risk_within(np.array([0.0]), 5)[0] == 1.0  # p = 1
    assert risk_within(np.array([-np.inf]), 5)[0] == 0.0  # p = 0
    x = [-1e-20, -0.1, -5.0, -800.0]
    want = [float(mpmath.log(1 - mpmath.exp(mpmath.mpf(v)))) for v in x]
    np.testing.assert_allclose(log1mexp(np.array(x)), want, rtol=1e-12)


def test_median_interval_coverage_by_simulation():
    from scipy.stats import beta

    truth = float(beta.median(0.5, 2.0))
    rng = np.random.default_rng(0)
    for n in (8, 30, 101):
        reps = 2000
        hits = 0
        for _ in range(reps):
            m = median_interval(rng.beta(0.5, 2.0, size=n))
            hits += m["ci_low"] <= truth <= m["ci_high"]
        assert hits / reps >= 0.94, (n, hits)  # nominal 95%, exact order statistics


# --------------------------------------------------------------------------- #
# the closed form against model.generate
# --------------------------------------------------------------------------- #
PREFIX, SUFFIX = 3, 3


@pytest.fixture(scope="module")
def tiny():
    """A GPT-2 from config whose final layer norm is scaled up (sharp next-token
    distributions, so p is large enough to sample), eight records that continue a random
    3-word prefix with the model's most likely words (p from 0.03 to 1 across the
    settings below) and four random records (p ~ 0)."""
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

    hf = word_tokenizer()
    model = build_causal_lm("gpt2", len(hf), seed=0, d=32)
    with torch.no_grad():
        model.transformer.ln_f.weight.mul_(25.0)
    model.eval()
    rng = np.random.default_rng(0)
    likely = []
    with torch.no_grad():
        for _ in range(8):
            ids = [0, *rng.integers(2, 122, size=PREFIX).tolist()]
            for _ in range(SUFFIX):
                logits = model(torch.tensor([ids])).logits[0, -1]
                logits[:2] = -torch.inf  # no <|endoftext|> / <unk> inside a record
                ids.append(int(logits.argmax()))
            likely.append(hf.decode(ids[1:]))
    rel = HFLMRelease(model, HFTokenizer(hf), 32, PrivacyClaim.none("test"))
    return rel, likely, random_texts(4, 12, length=PREFIX + SUFFIX)


def _closed_form(rel, texts, dec):
    from privacy_audit.attacks.extraction_risk import sequence_log_prob

    spec = ExtractionSpec(dec, PREFIX, SUFFIX)
    return [math.exp(sequence_log_prob(s)) for s in rel.extraction_stats(texts, spec)]


def _prompt_and_suffix(rel, text):
    from privacy_audit.targets.scoring import suffix_span

    row = rel.tokenizer.encode([text], rel.max_length)[0][0].tolist()
    s, e = suffix_span(row, rel.tokenizer.token_ids(text), PREFIX, SUFFIX)
    return row[: s + 1], row[s + 1 : e + 1]


def test_closed_form_matches_sampling_from_generate(tiny):
    from scipy.stats import binomtest

    rel, members, nonmembers = tiny
    settings = [
        Decoding(1.0, 0, 1.0),
        Decoding(0.5, 0, 1.0),
        Decoding(0.7, 20, 1.0),
        Decoding(1.0, 0, 0.9),
        Decoding(1.2, 8, 0.95),
        Decoding(0.8, 50, 0.8),
    ]
    n_draws = 300
    cases, inside = 0, 0
    torch.manual_seed(0)
    for dec in settings:
        texts = members + nonmembers
        for text, p in zip(texts, _closed_form(rel, texts, dec), strict=True):
            if not 0.02 <= p <= 0.98:  # too rare or too sure for 300 draws to test
                continue
            prompt, suffix = _prompt_and_suffix(rel, text)
            out = rel.model.generate(
                input_ids=torch.tensor([prompt]),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                do_sample=True,
                temperature=dec.temperature,
                top_k=dec.top_k,
                top_p=dec.top_p,
                max_new_tokens=SUFFIX,
                num_return_sequences=n_draws,
                pad_token_id=rel.tokenizer.pad_id,
                eos_token_id=rel.tokenizer.eos_id,
            )[:, len(prompt) :]
            k = int((out[:, :SUFFIX] == torch.tensor(suffix)).all(1).sum())
            ci = binomtest(k, n_draws).proportion_ci(0.95, method="exact")
            cases += 1
            inside += ci.low <= p <= ci.high
    assert cases >= 20, f"only {cases} cases with p in [0.02, 0.98]"
    print(f"closed form inside the 95% CI of {n_draws} draws in {inside} of {cases} cases")
    assert inside / cases >= 0.95, (inside, cases)


def test_top_k_one_risk_is_one_exactly_when_greedy_reproduces_the_suffix(tiny):
    rel, members, nonmembers = tiny
    texts = members + nonmembers
    ps = _closed_form(rel, texts, Decoding(1.0, 1, 1.0))
    seen = set()
    for text, p in zip(texts, ps, strict=True):
        prompt, suffix = _prompt_and_suffix(rel, text)
        greedy = rel.model.generate(
            input_ids=torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False,
            max_new_tokens=SUFFIX,
            pad_token_id=rel.tokenizer.pad_id,
        )[0, len(prompt) :].tolist()
        assert p in (0.0, 1.0)
        assert (p == 1.0) == (greedy[:SUFFIX] == suffix), (text, p, greedy, suffix)
        seen.add(p)
    assert seen == {0.0, 1.0}  # both outcomes occur, so the test can fail either way


def test_a_new_decoding_spec_never_reuses_another_specs_values(tiny):
    from privacy_audit.attacks.extraction_risk import sequence_log_prob
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.scoring import HFLMRelease

    rel, likely, _ = tiny
    a = ExtractionSpec(Decoding(1.0, 0, 1.0), PREFIX, SUFFIX)
    b = ExtractionSpec(Decoding(0.5, 0, 1.0), PREFIX, SUFFIX)
    rel.extraction_stats(likely[:4], a)  # texts scored under a ...
    rel.extraction_stats(likely[4:], b)  # ... then the spec changes on other texts
    got = [sequence_log_prob(s) for s in rel.extraction_stats(likely, b)]
    fresh = HFLMRelease(rel.model, rel.tokenizer, rel.max_length, PrivacyClaim.none("t"))
    want = [sequence_log_prob(s) for s in fresh.extraction_stats(likely, b)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not np.allclose(
        got[:4], [sequence_log_prob(s) for s in fresh.extraction_stats(likely[:4], a)]
    )


def test_ray_sharded_scoring_gives_the_local_suffix_probabilities(tmp_path):
    """``--executor ray``: the scoring replicas compute the decoding log-probabilities in
    the same pass, equal to the local ones."""
    from privacy_audit.audit.own_model import prefill_token_stats
    from privacy_audit.audit.scale.executors import ExecutorSpec
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release
    from tests.own_models import save

    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), seed=2, d=32), tok, tmp_path / "m")
    texts = random_texts(10, 4, length=8) + random_texts(3, 8, length=2)  # 3 too short
    spec = ExtractionSpec(Decoding(0.8, 20, 0.95), PREFIX, SUFFIX)

    def release():
        rel = load_causal_lm_release(
            load_audit_target(tmp_path / "m"), 32, PrivacyClaim.none(), "cpu", batch_size=4
        )
        rel.extraction = spec
        return rel

    local, remote = release(), release()
    assert prefill_token_stats(local, texts) == "local"
    spec_ray = ExecutorSpec(kind="ray", workers=2, num_cpus=2)
    assert prefill_token_stats(remote, texts, spec_ray, progress=False) == "ray"
    cached = remote.__dict__["_token_stats_cache"]
    assert all(cached[t].decoding_log_probs is not None for t in texts)  # from the Ray pass
    a = local.extraction_stats(texts, spec)
    b = remote.extraction_stats(texts, spec)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.decoding_log_probs, y.decoding_log_probs, atol=1e-6)
    assert sum(np.isnan(x.decoding_log_probs).all() for x in b) == 3


def test_a_nan_distribution_is_an_error_not_a_risk(tiny):
    """A model whose logits are NaN: the suffix is not measured (error), never 0 risk."""
    from privacy_audit.attacks.base import AttackContext, MetricSettings, run_leakage_attack
    from privacy_audit.attacks.extraction_risk import ExtractionRisk
    from privacy_audit.defenses.base import Examples, PrivacyClaim
    from privacy_audit.targets.scoring import HFLMRelease

    rel, likely, _ = tiny
    broken = build_causal_lm("gpt2", rel.tokenizer.vocab_size, seed=0, d=32)
    with torch.no_grad():
        broken.lm_head.weight.fill_(float("nan"))
    bad = HFLMRelease(broken, rel.tokenizer, rel.max_length, PrivacyClaim.none("t"))
    ex = Examples([str(i) for i in range(4)], likely[:4], np.zeros(4, dtype=int))
    res = run_leakage_attack(
        ExtractionRisk(prefix_tokens=PREFIX, suffix_tokens=SUFFIX),
        bad,
        AttackContext(ex, ex, settings=MetricSettings()),
    )
    assert res.status == "error" and "NaN" in res.reason
