"""The LM attack battery runs on a user's Hugging Face causal LM (``HFLMRelease`` behind
``HFTokenizer``), not only on the built-in targets: every new attack returns finite scores
or its metrics."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit.attacks import ATTACKS
from privacy_audit.attacks.base import AttackContext, MetricSettings, run_attack, run_leakage_attack
from privacy_audit.attacks.extraction_untargeted import UntargetedExtraction
from privacy_audit.defenses.base import Examples, PrivacyClaim
from tests.own_models import build_causal_lm, random_texts, word_tokenizer

SETTINGS = MetricSettings(n_boot=100)


def _ex(texts, m):
    return Examples(
        [f"t{i}" for i in range(len(texts))], texts, np.zeros(len(texts)), np.full(len(texts), m)
    )


@pytest.fixture(scope="module")
def release():
    from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

    hf = word_tokenizer()
    model = build_causal_lm("llama", len(hf), seed=0)
    return HFLMRelease(model, HFTokenizer(hf), 48, PrivacyClaim.none())


@pytest.mark.parametrize(
    "name", ["lm-loss", "min-k++", "recall", "neighbourhood", "dc-pdd", "lowercase", "grad-norm"]
)
def test_membership_attacks_run_on_a_users_hf_model(release, name):
    mem = _ex(random_texts(8, 1), 1)
    non = _ex(random_texts(8, 2), 0)
    public = _ex(random_texts(10, 3), 0)
    attack = ATTACKS[name](**({"neighbours": 2} if name == "neighbourhood" else {}))
    if hasattr(attack, "prepare"):
        attack.prepare(public=public, seed=0)
    if name == "lowercase":  # this tokenizer is case-sensitive: "W1" is <unk>, "w1" is not
        mem = _ex([t.upper() for t in mem.texts], 1)
    res = run_attack(attack, release, mem.concat(non), SETTINGS)
    assert res.status == "ok" and np.all(np.isfinite(res.scores))


def test_untargeted_extraction_runs_on_a_users_hf_model(release):
    texts = random_texts(8, 1)
    ctx = AttackContext(_ex(texts, 1), _ex(random_texts(8, 2), 0), None, None, SETTINGS, 0)
    r = run_leakage_attack(
        UntargetedExtraction(samples=6, new_tokens=8, min_tokens=3), release, ctx
    )
    assert r.status == "ok", r.reason
    assert r.metrics["extracted_rate"]["n"] >= 1
    assert "reference" in r.details["rankings_skipped"]  # no public split given


def test_neighbourhood_reads_a_users_neighbour_file(release, tmp_path):
    import json

    from privacy_audit.attacks.neighbourhood import NeighbourhoodAttack

    mem, non = _ex(random_texts(6, 1), 1), _ex(random_texts(6, 2), 0)
    texts = mem.texts + non.texts
    table = {t: [" ".join(reversed(t.split())), t.replace("w1", "w2")] for t in texts}
    path = tmp_path / "nb.json"
    path.write_text(json.dumps(table), encoding="utf-8")
    attack = NeighbourhoodAttack(source="file", neighbour_file=str(path))
    scores = attack.score(release, mem.concat(non))
    nll = [float(s.nll.mean()) for s in release.token_stats(texts)]
    nb = [np.mean([float(s.nll.mean()) for s in release.token_stats(table[t])]) for t in texts]
    np.testing.assert_allclose(scores, np.array(nb) - np.array(nll))
    path.write_text(json.dumps({texts[0]: ["x"]}), encoding="utf-8")
    with pytest.raises(ValueError, match="no neighbour list"):
        attack.score(release, mem.concat(non))
