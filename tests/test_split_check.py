"""The split check (issue 25): blind baseline, near-duplicates, the ``split-shifted``
verdict, the gate and the pytest plugin on a shifted split.

Known answers come from sklearn (AUC) and from planted duplicates; the blind interval's
coverage of 0.5 on same-distribution splits is measured by simulation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from privacy_audit.audit.split_check import (
    SplitCheck,
    blind_scores,
    check_audit_data,
    delong_auc,
    delong_difference,
    near_duplicates,
)


def prose(n: int, seed: int) -> list[str]:
    """Real English paragraphs from Python's own documentation topics, shuffled."""
    import pydoc_data.topics as topics

    paras = []
    for text in topics.topics.values():
        for p in text.split("\n\n"):
            p = " ".join(p.split())
            if len(p.split()) >= 12:
                paras.append(p[:300])
    paras = list(dict.fromkeys(paras))
    rng = np.random.default_rng(seed)
    return [paras[i] for i in rng.permutation(len(paras))[:n]]


def generator(n: int, seed: int, words: list[str], numbers: bool = False) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t = list(rng.choice(words, size=int(rng.integers(8, 16))))
        if numbers:
            t.insert(int(rng.integers(0, len(t))), str(int(rng.integers(1990, 2030))))
        out.append(" ".join(t))
    return out


# --------------------------------------------------------------------------- #
# DeLong: known answers
# --------------------------------------------------------------------------- #
def test_delong_auc_matches_sklearn_and_difference_of_a_score_with_itself_is_zero():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = np.r_[np.ones(70, int), np.zeros(50, int)]
    s = rng.normal(size=120) + 0.8 * y
    s[:10] = np.round(s[:10])  # ties
    s[60:70] = np.round(s[60:70])
    a = delong_auc(s, y)
    assert a["value"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert a["ci_low"] < a["value"] < a["ci_high"]
    d = delong_difference(s, s, y)
    assert d["value"] == 0 and d["se"] == pytest.approx(0, abs=1e-12)
    other = rng.normal(size=120)
    d = delong_difference(s, other, y)
    assert d["value"] == pytest.approx(roc_auc_score(y, s) - roc_auc_score(y, other), abs=1e-12)


def test_delong_variance_matches_the_hand_formula():
    """Var(AUC) = Var(V10)/m + Var(V01)/n with placements computed by brute force."""
    rng = np.random.default_rng(3)
    pos, neg = rng.normal(1, 1, 15), rng.normal(0, 1, 11)
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(1), psi.mean(0)
    se = np.sqrt(v10.var(ddof=1) / 15 + v01.var(ddof=1) / 11)
    a = delong_auc(np.r_[pos, neg], np.r_[np.ones(15), np.zeros(11)])
    assert a["se"] == pytest.approx(se, rel=1e-12)


# --------------------------------------------------------------------------- #
# Near-duplicates
# --------------------------------------------------------------------------- #
def test_planted_duplicates_are_found_counted_and_removed():
    from privacy_audit.audit.data import AuditData
    from privacy_audit.defenses.base import Examples

    members, nonmembers = prose(60, 1)[:30], prose(60, 1)[30:]
    # exact after normalising (case, white space), and near (one word changed)
    nonmembers[3] = "  " + members[5].upper() + "  "
    nonmembers[7] = members[9].replace(" ", "\n")
    words = members[12].split()
    words[len(words) // 2] = "CHANGED"
    nonmembers[11] = " ".join(words)
    pairs = near_duplicates(members, nonmembers)
    found = {(i, j) for i, j, _ in pairs}
    assert {(5, 3), (9, 7), (12, 11)} <= found
    assert len(found) == 3, pairs  # nothing else in 30 x 30 distinct paragraphs
    assert all(v >= 0.8 for *_, v in pairs)

    def ex(texts, tag):
        return Examples([f"{tag}{i}" for i in range(len(texts))], texts, np.zeros(len(texts)))

    data = AuditData(ex(members, "m"), ex(nonmembers, "n"), ex(nonmembers, "n"), ["-"])
    clean, check, blind = check_audit_data(data, seed=0, aggregate_only=False)
    d = check["duplicates"]
    assert (d["pairs"], d["exact_pairs"]) == (3, 2)
    assert (d["members_removed"], d["nonmembers_removed"]) == (3, 3)
    assert len(clean.members) == 27 and len(clean.nonmembers) == 27
    assert not {"m5", "m9", "m12"} & set(clean.members.ids)
    assert not {"n3", "n7", "n11"} & set(clean.nonmembers.ids)
    assert len(d["examples"]) == 3 and blind.shape == (54,)
    # aggregate-only: counts, no text
    _, check, _ = check_audit_data(data, seed=0, aggregate_only=True)
    assert "examples" not in check["duplicates"] and check["duplicates"]["pairs"] == 3


def test_dissimilar_texts_are_not_duplicates():
    a = prose(40, 5)
    assert near_duplicates(a[:20], a[20:]) == []


# --------------------------------------------------------------------------- #
# Blind baseline
# --------------------------------------------------------------------------- #
def test_shifted_generators_give_a_blind_auc_above_0_9():
    words = [f"w{i}" for i in range(120)]
    m = generator(40, 1, words[:60])
    n = generator(40, 2, words[50:], numbers=True)
    check, scores = SplitCheck().run(m, n)
    auc = check["blind"]["auc"]
    assert auc["value"] > 0.9 and auc["ci_low"] > 0.5
    assert check["shifted"] is True and check["status"] == "shifted"
    assert scores.shape == (80,) and np.all(np.isfinite(scores))
    assert "same source" in check["advice"] and "differ in their text" in check["text"]


def test_real_prose_from_two_sources_is_shifted_and_same_source_is_not():
    """pydoc topics vs stdlib module docstrings: shifted; pydoc vs pydoc: not."""
    import collections
    import email
    import json as json_mod
    import logging
    import os

    docs = []
    for mod in (json_mod, os, collections, email, logging):
        for obj in vars(mod).values():
            d = getattr(obj, "__doc__", None)
            if isinstance(d, str):
                for p in d.split("\n\n"):
                    p = " ".join(p.split())
                    if len(p.split()) >= 12:
                        docs.append(p[:300])
    docs = list(dict.fromkeys(docs))[:60]
    pyd = prose(120, 2)
    shifted, _ = SplitCheck(families=False).run(pyd[:60], docs)
    same, _ = SplitCheck(families=False).run(pyd[:60], pyd[60:])
    assert shifted["shifted"] is True
    assert same["shifted"] is False
    assert same["blind"]["auc"]["ci_low"] <= 0.5 <= same["blind"]["auc"]["ci_high"]


def test_duplicates_inside_one_set_do_not_look_like_a_shift():
    """A member paragraph repeated inside the members must not let the cross-fitted
    classifier recognise it by its twin in the training folds (folds keep near-duplicate
    groups together)."""
    base = prose(80, 4)
    members = base[:20] * 2  # every member twice
    nonmembers = base[40:80]
    s = blind_scores(members + nonmembers, np.r_[np.ones(40), np.zeros(40)], 5, 0)["combined"]
    a = delong_auc(s, np.r_[np.ones(40), np.zeros(40)])
    assert a["ci_low"] <= 0.5, a


def test_blind_interval_covers_chance_on_same_distribution_splits():
    """Coverage of 0.5 by the blind 95% interval over seeded same-distribution splits
    (the false ``split-shifted`` rate is its complement): misses <= 5% + binomial slack."""
    words = [f"w{i}" for i in range(40)]
    trials, misses = 60, 0
    for t in range(trials):
        texts = generator(60, 100 + t, words, numbers=bool(t % 2))
        check, _ = SplitCheck(seed=t, families=False).run(texts[:30], texts[30:])
        misses += check["shifted"]
    slack = binom.ppf(0.999, trials, 0.05)  # 99.9% upper quantile under a 5% miss rate
    assert misses <= slack, (misses, trials)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        SplitCheck().run(["a b c"], ["d e f", "g h i"])
    with pytest.raises(ValueError, match="folds"):
        SplitCheck(folds=1)


# --------------------------------------------------------------------------- #
# Verdict, gate and pytest plugin read the run's split check
# --------------------------------------------------------------------------- #
def _run_with(split: dict | None, shift: float = 1.5):
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import PrivacyClaim

    rng = np.random.default_rng(0)
    members = np.r_[np.ones(100, int), np.zeros(100, int)]
    scores = rng.normal(size=200) + shift * members
    res = AttackResult.from_scores("lm-loss", scores, members, None, MetricSettings(n_boot=100))
    run = run_record("as-is model", "as-is", PrivacyClaim.none(), None, [res])
    if split is not None:
        run["split_check"] = split
    return assemble_results([run], "split", 0, {})


def _split(shifted: bool) -> dict:
    auc = (
        {"value": 0.97, "ci_low": 0.95, "ci_high": 0.99}
        if shifted
        else {"value": 0.5, "ci_low": 0.42, "ci_high": 0.58}
    )
    check = {
        "shifted": shifted,
        "status": "shifted" if shifted else "ok",
        "confidence": 0.95,
        "blind": {"auc": auc, "n_members": 100, "n_nonmembers": 100, "families": {"length": 0.6}},
        "duplicates": {
            "pairs": 1,
            "exact_pairs": 1,
            "members_removed": 1,
            "nonmembers_removed": 1,
            "examples": [{"member": "<script>x</script>", "nonmember": "<b>y", "jaccard": 1.0}],
        },
        "advice": "Sample the non-members from the same source.",
        "attacks": [
            {
                "attack": "lm-loss",
                "auc": 0.86,
                "blind_auc": 0.97,
                "n": 200,
                "difference": {"value": -0.11, "ci_low": -0.15, "ci_high": -0.07},
            }
        ],
    }
    from privacy_audit.audit.split_check import split_text

    check["text"] = split_text(check)
    return check


def test_shifted_split_never_gives_high_or_low():
    before = _run_with(None)["runs"][0]["verdict"]
    assert before["level"] == "high"  # what the attacks alone say
    v = _run_with(_split(True))["runs"][0]["verdict"]
    assert v["level"] == "split-shifted"
    assert "blind AUC 0.970" in v["text"] and "same source" in v["text"]
    assert "Certified privacy loss" not in v["text"]
    # not shifted: the verdict is exactly what it was without a split check
    assert _run_with(_split(False))["runs"][0]["verdict"] == before


def test_gate_fails_on_a_shifted_split_unless_allowed(tmp_path, cli):
    from privacy_audit.audit.integrations.gate import check_all

    res = _run_with(_split(True), shift=0.0)
    _, failures = check_all(res, {"max_auc": 0.99})
    assert [f.kind for f in failures] == ["split-shifted"]
    assert check_all(res, {"max_auc": 0.99}, allow_shifted_split=True)[1] == []
    assert check_all(_run_with(_split(False), 0.0), {"max_auc": 0.99})[1] == []
    path = tmp_path / "results.json"
    path.write_text(json.dumps(res), encoding="utf-8")
    out = cli(["gate", str(path), "--max-auc", "0.99"])
    assert out.code == 1 and "shifted member/non-member split" in out.stdout, out.stdout
    out = cli(["gate", str(path), "--max-auc", "0.99", "--allow-shifted-split"])
    assert out.code == 0, out.stdout


def test_pytest_plugin_fails_on_a_shifted_split_unless_allowed():
    from privacy_audit.audit.integrations.pytest_plugin import AuditResults

    results = AuditResults(_run_with(_split(True), shift=0.0))
    with pytest.raises(AssertionError, match="split"):
        results.assert_within(max_auc=0.99)
    results.assert_within(max_auc=0.99, allow_shifted_split=True)


def test_report_escapes_duplicate_examples_and_shows_attack_beside_blind(tmp_path):
    from privacy_audit.reports import render_html

    res = _run_with(_split(True))
    html = render_html(res)
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x" not in html
    assert 'class="badge split-shifted"' in html
    assert "-0.110 [-0.150, -0.070]" in html
    res["aggregate_only"] = True
    assert "&lt;script&gt;x" not in render_html(res)


# --------------------------------------------------------------------------- #
# End to end: a user's model audited on a shifted and on a same-distribution split
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def untrained_lm(tmp_path_factory):
    """A tiny GPT-2 trained on neither set (its weights are all in the checkpoint)."""
    from own_models import build_causal_lm, save, word_tokenizer

    root = tmp_path_factory.mktemp("split")
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, root / "model")
    return root


def _audit(cli, root: Path, members, nonmembers, name: str):
    from own_models import write_lines

    write_lines(root / f"{name}-m.txt", members)
    write_lines(root / f"{name}-n.txt", nonmembers)
    out = root / name
    outcome = cli(
        ["run", "--model", str(root / "model"), "--members", str(root / f"{name}-m.txt")]
        + ["--nonmembers", str(root / f"{name}-n.txt"), "--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    (out / "stdout.txt").write_text(outcome.stdout)
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_shifted_split_end_to_end_is_split_shifted_and_gate_exits_1(untrained_lm, cli):
    from own_models import WORDS

    m = generator(40, 1, WORDS[:60])
    n = generator(40, 2, WORDS[60:120])
    out, res = _audit(cli, untrained_lm, m + [m[0]], n + [m[0].upper()], "shifted")
    run = res["runs"][0]
    check = run["split_check"]
    assert check["blind"]["auc"]["value"] > 0.9 and check["shifted"] is True
    assert check["duplicates"]["pairs"] >= 1  # the planted one (and its twin member)
    assert run["attacks"][0]["n_members"] == 39 and run["attacks"][0]["n_nonmembers"] == 40
    assert run["verdict"]["level"] == "split-shifted"
    assert (out / "stdout.txt").read_text().startswith("VERDICT model: SPLIT-SHIFTED")
    assert "(split SHIFTED)" in (out / "stdout.txt").read_text()
    assert {r["attack"] for r in check["attacks"]} == {a["attack"] for a in run["attacks"]}
    gate = cli(["gate", str(out / "results.json"), "--max-auc", "1.0"])
    assert gate.code == 1, gate.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Is the member / non-member split valid?" in html


def test_same_distribution_split_end_to_end_keeps_the_verdict(untrained_lm, cli):
    from own_models import random_texts

    from privacy_audit.reports.verdict import verdict_for_run

    # two texts that differ only after 64 tokens: identical as scored (cut to max_length)
    head = random_texts(1, 9, length=70)[0]
    m, n = random_texts(39, 1) + [head + " w1 w2"], random_texts(40, 2) + [head + " w3 w4"]
    _, res = _audit(cli, untrained_lm, m, n, "same")
    run = res["runs"][0]
    # the copy is dropped from the non-members after the cut (audit/data.py), before the check
    assert run["exact_duplicates"]["removed_nonmembers"] == 1
    assert run["split_check"]["duplicates"]["pairs"] == 0
    assert run["attacks"][0]["n_members"] == 40 and run["attacks"][0]["n_nonmembers"] == 40
    auc = run["split_check"]["blind"]["auc"]
    assert auc["ci_low"] <= 0.5 <= auc["ci_high"] and run["split_check"]["shifted"] is False
    without = {k: v for k, v in run.items() if k not in ("split_check", "verdict")}
    assert run["verdict"] == verdict_for_run(without)


def test_score_with_a_text_column_runs_the_split_check(tmp_path, cli):
    import csv

    words = [f"w{i}" for i in range(120)]
    m = generator(40, 1, words[:60])
    n = generator(40, 2, words[60:], numbers=True)
    n[0] = m[0]  # an exact copy: dropped from the non-members at loading (audit/data.py)
    n[1] = m[1] + " " + words[0]  # a near-duplicate: left to the split check
    rng = np.random.default_rng(0)
    path = tmp_path / "scores.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "score", "member", "text"])
        for i, t in enumerate(m + n):
            w.writerow([f"r{i}", rng.normal() + (i < 40), int(i < 40), t])
    out = cli(["score", str(path), "--out", str(tmp_path / "out")])
    assert out.code == 0, out.stderr
    res = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    run = res["runs"][0]
    assert run["exact_duplicates"]["removed_nonmembers"] == 1
    assert run["split_check"]["duplicates"]["pairs"] == 1
    assert run["attacks"][0]["n_members"] == 39 and run["attacks"][0]["n_nonmembers"] == 38
    ids = run["attacks"][0]["examples"]["ids"]
    assert "r0" in ids and "r40" not in ids  # the member of an exact copy stays
    assert "r1" not in ids and "r41" not in ids  # both texts of a near-duplicate go
    assert run["verdict"]["level"] == "split-shifted" and "SPLIT SHIFTED" in out.stdout
    assert run["split_check"]["attacks"][0]["n"] == 77


# --------------------------------------------------------------------------- #
# Browser: the split section and the new verdict level render in headless Chromium
# --------------------------------------------------------------------------- #
def test_split_section_and_level_render_in_headless_chromium(tmp_path):
    import subprocess

    from test_browser import CHROMIUM_FLAGS, PAYLOADS, _DomScan, chromium_binary

    from privacy_audit.reports import write_report

    split = _split(True)
    split["duplicates"]["examples"][0]["member"] = PAYLOADS["script"]
    split["duplicates"]["examples"][0]["nonmember"] = PAYLOADS["img"]
    path = write_report(_run_with(split), tmp_path / "report")
    common = [chromium_binary(), *CHROMIUM_FLAGS, "--virtual-time-budget=3000"]
    dom = subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    ).stdout.decode("utf-8")
    scan = _DomScan()
    scan.feed(dom)
    text = "".join(scan.text)
    ids = [a.get("id") for _, a in scan.tags]
    assert "run-0-split" in ids
    badges = [a for t, a in scan.tags if t == "span" and "split-shifted" in a.get("class", "")]
    assert len(badges) >= 3  # summary, verdict, run heading (+ legend, split section)
    assert "Is the member / non-member split valid?" in text and "What to do:" in text
    assert "blind AUC 0.970" in text and "-0.110 [-0.150, -0.070]" in text
    assert PAYLOADS["script"] in text and "script" not in [t for t, _ in scan.tags]
    assert PAYLOADS["img"] in text and not any("onerror" in a for _, a in scan.tags)
    shot = tmp_path / "top.png"
    subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1280,900"]
        + [f"--screenshot={shot}", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    )
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    orange = (np.abs(pixels - [0xFF, 0xF4, 0xE5]).sum(1) < 12).sum()  # the badge fill
    assert orange > 50  # the split-shifted badge is painted in the first screen
