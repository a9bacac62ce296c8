"""Where the split check, exact-duplicate removal, reference models and the gate meet
(issues 24-26): each piece was right alone; these pin what must hold when they run
together."""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest

from privacy_audit.audit.data import AuditData, drop_cross_duplicates
from privacy_audit.audit.integrations.gate import check, check_all
from privacy_audit.audit.own_model import check_audit_data
from privacy_audit.audit.references import z_pool
from privacy_audit.audit.runner import score_file
from privacy_audit.defenses.base import Examples
from privacy_audit.ground.errors import DataError
from privacy_audit.reports.verdict import check_claim, verdict_for_run

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()


def _sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(n)]


def _examples(texts: list[str], prefix: str) -> Examples:
    ids = [f"{prefix}{i}" for i in range(len(texts))]
    return Examples(ids=ids, texts=list(texts), labels=np.zeros(len(texts), np.int64))


def _planted() -> AuditData:
    m, n = _sentences(20, 0), _sentences(20, 1)
    n[0] = m[0]  # an exact copy: leaves the non-members at loading
    n[1] = m[1] + " x"  # a near-duplicate: both texts leave in the split check
    # the default test set is a separate copy of the non-members, as load_audit_data builds it
    return AuditData(_examples(m, "m"), _examples(n, "n"), _examples(n, "n"), ["x"])


def test_split_check_keeps_the_exact_duplicate_record_and_the_test_set_follows():
    data = drop_cross_duplicates(_planted(), "at loading")
    assert data.exact_duplicates["removed_nonmembers"] == 1
    out, split, _ = check_audit_data(data, 0, False)
    assert split["duplicates"]["pairs"] == 1
    # the record of the exact copy survives the split check's removal
    assert out.exact_duplicates == data.exact_duplicates
    # a removed non-member never comes back as a test / RMIA population text
    assert out.test.ids == out.nonmembers.ids and "n1" not in out.test.ids
    extra, what = z_pool(out, out.attack_set().texts)
    assert extra == [] and "audited texts themselves" in what


def _shifted_scores(tmp_path) -> dict:
    """Members and non-members from two different vocabularies, scores far apart."""
    rng = random.Random(3)
    a, b = WORDS[:7], [f"w{i}" for i in range(7)]
    path = tmp_path / "s.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "score", "member", "text"])
        for i in range(60):
            w.writerow([f"m{i}", 1 + i / 100, 1, " ".join(rng.choice(a) for _ in range(10))])
            w.writerow([f"n{i}", i / 100, 0, " ".join(rng.choice(b) for _ in range(10))])
    return score_file(path, 1e-5, 200, 0)


def test_a_shifted_split_never_reads_as_a_violated_claim(tmp_path):
    res = _shifted_scores(tmp_path)
    run = res["runs"][0]
    assert run["split_check"]["shifted"] is True
    lb = run["attacks"][0]["metrics"]["epsilon_lower_bound"]["value"]
    assert lb > 0.5  # the attack "certifies" more than the claim below ...
    run["claim"] = {"epsilon": 0.5, "delta": None, "unit": "example", "notion": "central-dp"}
    run.pop("verdict", None)
    # ... but on a shifted split that bound measures the texts, not the model
    assert check_claim(run)["status"] == "unmeasured"
    assert verdict_for_run(run)["claim_status"] == "unmeasured"
    limits = {"max_auc": None, "max_tpr_at_1pct_fpr": None, "max_epsilon_lb": None}
    _, failures = check_all(res, limits, allow_shifted_split=True)
    assert [f.kind for f in failures] == []
    _, failures = check_all(res, limits)
    assert [f.kind for f in failures] == ["split-shifted"]


def test_gate_check_never_passes_an_inverted_or_shifted_run_silently(tmp_path):
    limits = {"max_auc": 0.99, "max_tpr_at_1pct_fpr": None, "max_epsilon_lb": None}
    path = tmp_path / "inv.csv"
    rows = "".join(f"{i / 100},1\n{1 + i / 100},0\n" for i in range(40))
    path.write_text("score,member\n" + rows, encoding="utf-8")
    inverted = score_file(path, 1e-5, 200, 0)
    assert inverted["runs"][0]["verdict"]["level"] == "invalid-attack"
    with pytest.raises(DataError, match="invalid-attack"):
        check(inverted, limits)
    with pytest.raises(DataError, match="shifted"):
        check(_shifted_scores(tmp_path), limits)


def test_blank_text_cells_are_not_duplicates_of_each_other(tmp_path):
    path = tmp_path / "s.csv"
    texts = _sentences(40, 5)
    lines = ["id,score,member,text"]
    for i in range(20):
        lines.append(f"m{i},{1 + i / 100},1,{texts[i] if i else ''}")
        lines.append(f"n{i},{i / 100},0,{'' if i < 10 else texts[20 + i]}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = score_file(path, 1e-5, 200, 0)["runs"][0]
    assert run["exact_duplicates"]["removed_nonmembers"] == 0
    assert run["attacks"][0]["n_nonmembers"] == 20
