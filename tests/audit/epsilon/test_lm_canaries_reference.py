"""Reference-calibrated LM canary scores: log p_after(secret) − log p_before(secret), with
the model before training rebuilt exactly (seeded new-token rows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privacy_audit.audit.epsilon.lm_canaries import (
    calibrated_scores,
    extend_builtin,
    make_lm_canaries,
    reference_secret_scores,
    release_secret_scores,
)
from privacy_audit.defenses.base import PrivacyClaim
from privacy_audit.targets.lm import LMRelease, build_lm_target

TEXTS = ["the cat sat on the mat today", "a dog ran in the park at noon"] * 4


def test_calibrated_score_known_answer():
    after = [-1.0, -2.0, -3.0, -0.5]
    before = [-4.0, -2.0, -1.0, -8.5]
    np.testing.assert_array_equal(calibrated_scores(after, before), [3.0, 0.0, -2.0, 8.0])
    with pytest.raises(ValueError, match="one length"):
        calibrated_scores([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        calibrated_scores([1.0, np.nan], [1.0, 2.0])


def _canary_model(n=12, seed=0, init="random"):
    model, tok = build_lm_target("tiny-gpt2-word", seed=0)
    cs = make_lm_canaries(n, "new-token", tok, texts=TEXTS, seed=1, secret_tokens=3)
    return (*extend_builtin(model, tok, cs.new_tokens, seed, init), cs)


def test_new_token_rows_are_set_by_design_not_by_the_global_rng():
    torch.manual_seed(5)
    a, _, cs = _canary_model(init="random")
    torch.rand(1000)  # a different global RNG state, as after a cached public stage
    b, _, _ = _canary_model(init="random")
    c, _, _ = _canary_model(seed=1, init="random")
    n_new = len(cs.new_tokens)
    wa, wb, wc = (m.get_input_embeddings().weight.detach() for m in (a, b, c))
    assert torch.equal(wa, wb)  # the model before training is rebuilt exactly
    assert not torch.equal(wa[-n_new:], wc[-n_new:])
    assert torch.equal(wa[:-n_new], wc[:-n_new])  # old rows untouched
    assert 0.015 < float(wa[-n_new:].std()) < 0.025  # GPT-2's embedding init, N(0, 0.02²)
    # "mean": every new row is the old rows' mean (Hugging Face's mean resizing, noiseless)
    m, _, _ = _canary_model(seed=3, init="mean")
    w = m.get_input_embeddings().weight.detach()
    torch.testing.assert_close(w[-n_new:], w[:-n_new].double().mean(0).float().expand(n_new, -1))
    assert torch.equal(w[:-n_new], wa[:-n_new])
    with pytest.raises(ValueError, match="new-token init"):
        _canary_model(init="zeros")


def test_reference_scores_read_the_release_path_and_calibrate_the_audit():
    from privacy_audit.audit.epsilon.claimed_vs_audited import (
        EpsilonAuditSettings,
        input_canary_audit,
    )

    model, tok, cs = _canary_model()
    release = LMRelease(model, tok, 40, PrivacyClaim.none())
    after = release_secret_scores(release, cs)
    cached = dict(release._token_stats_cache)
    same, _, _ = _canary_model()
    np.testing.assert_allclose(reference_secret_scores(release, same, cs), after, atol=1e-12)
    assert release._token_stats_cache.keys() == cached.keys() and release.model is model
    # a reference whose new rows differ: the audit scores after − before, never the bits
    other, _, _ = _canary_model(seed=7, init="random")
    before = reference_secret_scores(release, other, cs)
    assert np.abs(before - after).max() > 1e-4
    cs.reference = other
    res = input_canary_audit(release, cs, EpsilonAuditSettings(), None)
    assert res["score"] == "calibrated" and "before training" in res["threat_model"]
    np.testing.assert_allclose(res["examples"]["scores"], after - before, atol=1e-12)
    cs.reference = None
    raw = input_canary_audit(release, cs, EpsilonAuditSettings(), None)
    assert raw["score"] == "raw"
    np.testing.assert_allclose(raw["examples"]["scores"], after, atol=1e-12)


def test_contrast_score_known_answer():
    """log p(secret token) − mean log p(new tokens), same context, averaged over the secret."""
    from privacy_audit.audit.epsilon.lm_canaries import (
        TokenView,
        contrast_secret_scores,
        secret_span,
    )

    model, tok, cs = _canary_model(n=6)
    view = TokenView(tok)
    new_ids = [view.ids(t)[0] for t in cs.new_tokens]
    a, b = 1e-4, 5e-3  # every new token gets a, the next secret token b (canary 0: 2b)

    class Fake:
        tokenizer = tok

        def probabilities(self, texts):
            out = np.full((len(texts), tok.vocab_size), 1e-6)
            for r, t in enumerate(texts):
                out[r, new_ids] = a
                for i, full in enumerate(cs.examples.texts):
                    ids = view.ids(full)
                    lo, hi = secret_span(view, cs.prefixes[i], full)
                    for k in range(lo, hi):
                        if view.text(ids[:k]) == t:
                            out[r, ids[k]] = 2 * b if i == 0 else b
            return out

    n = len(new_ids)
    got = contrast_secret_scores(Fake(), cs, chunk=4)
    for i in range(len(cs.included)):
        p = 2 * b if i == 0 else b
        want = np.log(p) - ((n - 1) * np.log(a) + np.log(p)) / n
        assert got[i] == pytest.approx(want, rel=1e-9)
    cs.new_tokens = ()
    with pytest.raises(ValueError, match="new-token"):
        contrast_secret_scores(Fake(), cs)
