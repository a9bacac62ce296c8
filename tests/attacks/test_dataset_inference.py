"""Dataset inference (issue 25; Maini et al. 2024): known answers against scipy and
sklearn, validity under the null (seeded trials), power on a fine-tuned tiny LM, and the
``privacy-audit dataset-inference`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from privacy_audit.attacks.dataset_inference import (
    DatasetInference,
    aggregate,
    fit_aggregator,
    lm_features,
    welch_one_sided,
)


def _slack(trials: int, rate: float = 0.05) -> int:
    """Rejections allowed at a true rate of ``rate``: the binomial 99.9% upper quantile."""
    return int(stats.binom.ppf(0.999, trials, rate))


# --------------------------------------------------------------------------- #
# Known answers
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("seed", range(5))
def test_welch_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(0.3, 1.0, 17 + seed)
    b = rng.normal(0.0, 2.5, 40 - seed)
    ours = welch_one_sided(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
    assert ours["t"] == pytest.approx(ref.statistic, rel=1e-12)
    assert ours["p_value"] == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours["df"] == pytest.approx(ref.df, rel=1e-12)


def test_aggregator_matches_sklearn_linear_regression():
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 4)) @ rng.normal(size=(4, 4))
    y = (rng.random(60) < 0.5).astype(float)
    mu, sd, w = fit_aggregator(x, y)
    z = StandardScaler().fit(x)
    lr = LinearRegression().fit(z.transform(x), y)
    x_new = rng.normal(size=(9, 4))
    assert aggregate(x_new, mu, sd, w) == pytest.approx(lr.predict(z.transform(x_new)), abs=1e-9)


def test_whole_test_matches_an_independent_recomputation():
    """Same fixed split (re-derived from the seed), sklearn's regression, scipy's t-test."""
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(2)
    xs = rng.normal(0.2, 1, size=(50, 3))
    xv = rng.normal(0.0, 1, size=(44, 3))
    res = DatasetInference(fit_fraction=0.5, seed=7).test(xs, xv)
    r = np.random.default_rng(7)
    ps, pv = r.permutation(50), r.permutation(44)
    fs, ts, fv, tv = ps[:25], ps[25:], pv[:22], pv[22:]
    x_fit = np.vstack([xs[fs], xv[fv]])
    sc = StandardScaler().fit(x_fit)
    lr = LinearRegression().fit(sc.transform(x_fit), np.r_[np.ones(25), np.zeros(22)])
    a, b = lr.predict(sc.transform(xs[ts])), lr.predict(sc.transform(xv[tv]))
    ref = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
    assert res["p_value"] == pytest.approx(ref.pvalue, rel=1e-8)
    assert res["n_test"] == {"suspect": 25, "validation": 22}
    assert res["n_fit"] == {"suspect": 25, "validation": 22}
    d = (a.mean() - b.mean()) / np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    assert res["effect_size"] == pytest.approx(d, rel=1e-8)
    assert "same distribution" in res["assumption"]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 4"):
        DatasetInference().test(np.zeros((3, 2)), np.zeros((9, 2)))
    with pytest.raises(ValueError, match="NaN"):
        DatasetInference().test(np.full((9, 2), np.nan), np.zeros((9, 2)))
    with pytest.raises(ValueError, match="fit_fraction"):
        DatasetInference(fit_fraction=1.0)


# --------------------------------------------------------------------------- #
# Validity under the null
# --------------------------------------------------------------------------- #
def test_null_rejection_rate_on_synthetic_signals():
    """400 seeded trials, suspect and validation from the same skewed, correlated
    5-feature distribution: p <= 0.05 in at most 5% + binomial slack of them."""
    trials, rejected = 400, 0
    mix = np.random.default_rng(99).normal(size=(5, 5))
    for t in range(trials):
        rng = np.random.default_rng(t)
        xs = rng.standard_t(4, size=(80, 5)) @ mix + rng.exponential(size=(80, 1))
        xv = rng.standard_t(4, size=(80, 5)) @ mix + rng.exponential(size=(80, 1))
        rejected += DatasetInference(seed=t).test(xs, xv)["p_value"] <= 0.05
    assert rejected <= _slack(trials), (rejected, trials)
    assert rejected >= 1  # the test is not trivially conservative (p never small)


@pytest.fixture(scope="module")
def tiny_lms(tmp_path_factory):
    """A word tokenizer, suspect / validation / pool texts of one generator, a GPT-2
    fine-tuned on the suspect texts, and its base (trained on neither)."""
    from tests.own_models import build_causal_lm, fine_tune, random_texts, save, word_tokenizer

    root = tmp_path_factory.mktemp("di")
    tok = word_tokenizer()
    suspect, validation = random_texts(48, 11), random_texts(48, 12)
    base = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    save(base, tok, root / "base")
    tuned = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    fine_tune(tuned, tok, suspect, epochs=15)
    save(tuned, tok, root / "tuned")
    return {"root": root, "tok": tok, "suspect": suspect, "validation": validation}


def _release(path, max_length=32):
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    loaded = load_audit_target(str(path), "causal-lm", device="cpu")
    return load_causal_lm_release(loaded, max_length, PrivacyClaim.none(), "cpu", batch_size=16)


def test_null_rejection_rate_on_a_real_tiny_lm(tiny_lms):
    """One forward pass over 200 texts the fine-tuned model never saw (same generator as
    its training texts); 200 seeded random suspect / validation partitions of them."""
    from tests.own_models import random_texts

    pool = random_texts(200, 77)
    x, _ = lm_features(_release(tiny_lms["root"] / "tuned"), pool)
    trials, rejected = 200, 0
    for t in range(trials):
        perm = np.random.default_rng(1000 + t).permutation(len(pool))
        rejected += DatasetInference(seed=t).test(x[perm[:100]], x[perm[100:]])["p_value"] <= 0.05
    assert rejected <= _slack(trials), (rejected, trials)


def test_power_on_a_model_fine_tuned_on_the_suspect_set(tiny_lms):
    rel = _release(tiny_lms["root"] / "tuned")
    xs, names = lm_features(rel, tiny_lms["suspect"])
    xv, _ = lm_features(rel, tiny_lms["validation"])
    res = DatasetInference().test(xs, xv, names)
    assert res["p_value"] < 0.01 and res["significant"] and res["effect_size"] > 0
    # the same texts on the model that never saw them: no evidence
    rel0 = _release(tiny_lms["root"] / "base")
    res0 = DatasetInference().test(
        lm_features(rel0, tiny_lms["suspect"])[0], lm_features(rel0, tiny_lms["validation"])[0]
    )
    assert res0["p_value"] > 0.01


def test_split_guard_says_when_the_check_cannot_see_a_biasing_shift():
    """The guard's detectable AUC is 0.5 + (z_0.99 + z_0.8) x the permutation null SD
    (scipy's normal quantiles); it speaks only when that is at most 0.65."""
    from privacy_audit.attacks.dataset_inference import result_text, split_guard

    def check(sd, n):
        return {
            "confidence": 0.98,  # the split check's own level (one-sided 1%)
            "blind": {"auc": {"null_sd": sd}, "n_members": n, "n_nonmembers": n},
        }

    z = stats.norm.ppf(0.99) + stats.norm.ppf(0.8)
    small, large = split_guard(check(0.09, 40)), split_guard(check(0.04, 400))
    assert small["detectable_auc"] == pytest.approx(0.5 + z * 0.09, abs=1e-12)
    assert small["can_speak"] is False and "cannot speak" in small["text"]
    assert large["can_speak"] is True and "would have been flagged" in large["text"]
    assert split_guard({"blind": {}})["can_speak"] is False
    # a check dict without its level is read at the split check's own (98%), not at 95%
    bare = split_guard({"blind": check(0.09, 40)["blind"]})
    assert bare["detectable_auc"] == pytest.approx(0.5 + z * 0.09, abs=1e-12)
    res = {
        "status": "ok", "p_value": 0.029, "t": 2.0, "df": 30.0, "effect_size": 0.5,
        "alpha": 0.05, "significant": True, "n_test": {"suspect": 20, "validation": 20},
    }  # fmt: skip
    assert "cannot speak" in result_text({**res, "split_guard": small})
    assert "cannot speak" not in result_text({**res, "split_guard": large})
    assert "p = 0.029" in result_text({**res, "split_guard": small})


# --------------------------------------------------------------------------- #
# The command
# --------------------------------------------------------------------------- #
def _di(cli, root, *args):
    out = root / f"out-{abs(hash(args)) % 10**8}"
    outcome = cli(["dataset-inference", *args, "--out", str(out), "--quiet"])
    res = None
    if (out / "results.json").is_file():
        res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return outcome, res, out


def test_command_gives_a_p_value_with_reference_and_config(tiny_lms, cli):
    from tests.own_models import write_lines

    root = tiny_lms["root"]
    write_lines(root / "suspect.txt", tiny_lms["suspect"])
    write_lines(root / "validation.txt", tiny_lms["validation"])
    args = ["--model", str(root / "tuned"), "--suspect", str(root / "suspect.txt")]
    args += ["--validation", str(root / "validation.txt")]
    outcome, res, out = _di(cli, root, *args)
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    assert r["status"] == "ok" and r["p_value"] < 0.01 and r["split_check"]["shifted"] is False
    # 48 + 48 texts: too few for the split check to see a shift that would bias the test
    guard = r["split_guard"]
    assert guard["can_speak"] is False and guard["detectable_auc"] > 0.65
    assert "cannot speak" in r["text"] and f"{guard['detectable_auc']:.3f}" in r["text"]
    assert r["n_test"]["suspect"] + r["n_fit"]["suspect"] == 48
    assert outcome.stdout.startswith("DATASET INFERENCE: OK; p = ")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "same distribution" in html
    # the guard runs the split check at its own level, and the report names it
    assert r["split_check"]["confidence"] == 0.98 and "Split check (blind AUC, 98% CI)" in html
    outcome, res, _ = _di(cli, root, *args, "--reference", str(root / "base"))
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert res["dataset_inference"]["features"][-1] == "reference-diff"
    cfg = root / "di.toml"
    cfg.write_text(
        '[target]\naudit_dir = "tuned"\n[dataset_inference]\nsuspect = "suspect.txt"\n'
        'validation = "validation.txt"\nalpha = 0.05\n',
        encoding="utf-8",
    )
    outcome, res, _ = _di(cli, root, str(cfg))
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert res["dataset_inference"]["alpha"] == 0.05
    assert res["dataset_inference"]["p_value"] == pytest.approx(r["p_value"])
    # the record holds the settings that applied, not the suite's training defaults
    rec = res["config"]
    assert rec["data"]["suspect"].endswith("suspect.txt")
    assert rec["dataset_inference"]["alpha"] == 0.05
    assert rec["target"]["audit_dir"].endswith("tuned")
    flat = json.dumps(rec)
    for absent in ('"corpus"', '"n_members"', '"train"', '"epochs"', '"defenses"', "fixtures"):
        assert absent not in flat, absent


def test_command_gives_no_p_value_on_a_shifted_pair(tiny_lms, cli):
    from tests.own_models import WORDS, write_lines

    root = tiny_lms["root"]
    rng = np.random.default_rng(5)
    other = [" ".join(rng.choice(WORDS[:40], 12)) for _ in range(48)]  # another generator
    write_lines(root / "suspect2.txt", tiny_lms["suspect"])
    write_lines(root / "other.txt", other)
    outcome, res, _ = _di(
        cli,
        root,
        "--model",
        str(root / "base"),
        "--suspect",
        str(root / "suspect2.txt"),
        "--validation",
        str(root / "other.txt"),
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    assert r["status"] == "split-shifted" and r["p_value"] is None
    assert "No p-value" in r["text"]


def test_command_bad_input_is_one_line_exit_2(tiny_lms, cli, tmp_path):
    root = tiny_lms["root"]
    out = cli(["dataset-inference", "--model", str(root / "tuned"), "--suspect", "x.txt"])
    assert out.code == 2 and "--validation" in out.stderr
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[target]\naudit_dir = "m"\n[dataset_inference]\nsuspect = "a"\n')
    out = cli(["dataset-inference", str(cfg), "--out", str(tmp_path / "o")])
    assert out.code == 2 and "dataset_inference.validation" in out.stderr
    assert not (tmp_path / "o" / "results.json").exists()


@pytest.mark.slow
def test_command_on_ray_gives_the_local_p_value(tiny_lms, cli):
    """``--executor ray`` scores the texts on Ray actors (one model replica each); the
    features, so the p-value, are the local ones."""
    from tests.own_models import write_lines

    root = tiny_lms["root"]
    write_lines(root / "suspect.txt", tiny_lms["suspect"])
    write_lines(root / "validation.txt", tiny_lms["validation"])
    args = ["--model", str(root / "tuned"), "--suspect", str(root / "suspect.txt")]
    args += ["--validation", str(root / "validation.txt")]
    outcome, local, _ = _di(cli, root, *args)
    assert outcome.code == 0, outcome.stderr[-3000:]
    outcome, remote, _ = _di(cli, root, *args, "--executor", "ray")
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert remote["dataset_inference"]["scoring"] == "ray"
    assert remote["dataset_inference"]["p_value"] == pytest.approx(
        local["dataset_inference"]["p_value"], rel=1e-4
    )


def test_the_guard_sentence_never_contradicts_itself_at_the_threshold():
    """A detectable AUC just above the shift that would bias the test (0.652 vs 0.650) read
    "detects only 0.65 or more … (e.g. blind AUC 0.65) could pass unnoticed" at two
    decimals."""
    from scipy import stats

    from privacy_audit.attacks.dataset_inference import GUARD_POWER, GUARD_SHIFT_AUC, split_guard
    from privacy_audit.stats.blind_baseline import SHIFT_CONFIDENCE

    # the null SD whose detectable AUC is 0.002 above the guard's shift
    z = stats.norm.ppf(SHIFT_CONFIDENCE) + stats.norm.ppf(GUARD_POWER)
    sd = (GUARD_SHIFT_AUC + 0.002 - 0.5) / z
    check = {"blind": {"auc": {"null_sd": sd}, "n_members": 50, "n_nonmembers": 50}}
    g = split_guard(check)
    assert g["can_speak"] is False
    det, shift = f"{g['detectable_auc']:.3f}", f"{GUARD_SHIFT_AUC:.3f}"
    assert det != shift, (det, shift)
    assert f"detects only a shift of blind AUC {det} or more" in g["text"]
    assert f"a shift of blind AUC {shift}, large enough to bias this test" in g["text"]


def test_copies_inside_the_suspect_set_count_once(tiny_lms, cli):
    """20 copies of one suspect text are one text: the test reads distinct texts only and
    the record says how many were collapsed."""
    from tests.own_models import write_lines

    root = tiny_lms["root"]
    suspect = tiny_lms["suspect"] + [tiny_lms["suspect"][0]] * 20
    write_lines(root / "suspect-copies.txt", suspect)
    write_lines(root / "validation.txt", tiny_lms["validation"])
    args = ["--model", str(root / "tuned"), "--suspect", str(root / "suspect-copies.txt")]
    args += ["--validation", str(root / "validation.txt")]
    outcome, res, _ = _di(cli, root, *args)
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    w = r["split_check"]["duplicates"]["within_suspect"]
    assert (w["texts"], w["distinct"], w["removed"], w["largest"]) == (68, 48, 20, 21)
    assert r["n_test"]["suspect"] + r["n_fit"]["suspect"] == 48


def test_a_suspect_set_of_one_text_copied_is_refused(tiny_lms, cli, tmp_path):
    """Copies collapse to one text: a set of one distinct text cannot be tested, so the
    command says so in one line (exit 2) and writes nothing, never a p-value."""
    from tests.own_models import write_lines

    root = tiny_lms["root"]
    write_lines(tmp_path / "suspect-one.txt", [tiny_lms["suspect"][0]] * 12)
    write_lines(tmp_path / "validation.txt", tiny_lms["validation"])
    out = cli(
        ["dataset-inference", "--model", str(root / "tuned"), "--suspect",
         str(tmp_path / "suspect-one.txt"), "--validation", str(tmp_path / "validation.txt"),
         "--out", str(tmp_path / "o")]
    )  # fmt: skip
    assert out.code == 2, out.stderr[-2000:]
    said = [ln for ln in out.stderr.splitlines() if "distinct text(s)" in ln]
    assert len(said) == 1 and "at least 2 per set" in said[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "o" / "results.json").exists()
