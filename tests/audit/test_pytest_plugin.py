"""The pytest plugin (audit/integrations/pytest_plugin.py): fixture, marker, results wrapper, sample project.

The sample project in tests/sample_project is run here, in a pytester copy, as shipped
(it must pass) and pointed at its deliberately regressed config (it must fail, naming the
metric). Its own conftest keeps the outer run from collecting it a second time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from privacy_audit.audit.integrations.pytest_plugin import AuditResults

pytest_plugins = ["pytester"]

SAMPLE = Path(__file__).parents[1] / "sample_project"

# Members score N(2, 1), non-members N(0, 1): AUC about 0.92, clearly separable.
SCORES_MODULE = """
import numpy as np

rng = np.random.default_rng(0)
# 800 per side: enough non-members to resolve TPR at 1% FPR, which max_tpr_at_1pct_fpr holds
SCORES = np.concatenate([rng.normal(2.0, 1.0, 800), rng.normal(0.0, 1.0, 800)])
MEMBERS = np.array([1] * 800 + [0] * 800)
"""


def separable(n: int = 200, shift: float = 2.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)])
    return scores, np.array([1] * n + [0] * n)


@pytest.fixture(scope="module", autouse=True)
def _warm_up_scoring(tmp_path_factory):
    """Score and render one report in this process before any inner session runs.

    pytester runs the inner sessions in-process and afterwards unloads every module first
    imported during the test; extension modules (scipy, matplotlib) cannot be loaded twice.
    Exercising the scoring path once up front means the inner sessions import nothing new.
    (The sample project, which trains a model, runs in a subprocess instead.)
    """
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.integrations.gate import check
    from privacy_audit.audit.results import assemble_results, run_record, write_outputs
    from privacy_audit.defenses.base import PrivacyClaim

    scores, members = separable(n=50)
    res = AttackResult.from_scores("warm-up", scores, members, settings=MetricSettings(n_boot=100))
    run = run_record("warm-up", "user-scores", PrivacyClaim.none(), None, [res])
    raw = assemble_results([run], "warm-up", 0, {})
    check(raw, {"max_auc": 1.0})
    write_outputs(raw, tmp_path_factory.mktemp("warm-up"))


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An in-process inner session; hypothesis' plugin (slow to load) is not needed there."""
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args)


def run_sample(pytester: pytest.Pytester) -> pytest.RunResult:
    """Run the sample project as a user would: ``pytest`` in its directory, a fresh process."""
    shutil.copytree(
        SAMPLE,
        pytester.path,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
    )
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", timeout=300
    )


# -- the sample project ------------------------------------------------------------------


@pytest.mark.slow
def test_sample_project_passes_as_shipped(pytester, monkeypatch):
    monkeypatch.delenv("PRIVACY_CONFIG", raising=False)
    result = run_sample(pytester)
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_sample_project_fails_on_regressed_config(pytester, monkeypatch):
    monkeypatch.setenv("PRIVACY_CONFIG", "privacy_regressed.toml")
    result = run_sample(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*privacy thresholds exceeded*",
            "*AUC of attack * on 'dp-sgd' is *, above the threshold 0.62",
        ]
    )
    assert "Traceback" not in result.stdout.str()  # a readable failure, not a plugin crash


def test_outer_run_does_not_collect_the_sample(pytester):
    """Nested in a bigger project (rootdir elsewhere), the sample's test is not collected."""
    shutil.copytree(
        SAMPLE,
        pytester.path / "tests" / "sample_project",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    pytester.makepyfile(**{"tests/test_other.py": "def test_other():\n    pass\n"})
    pytester.makeini("[pytest]\n")
    result = run_inner(pytester, "tests")
    result.assert_outcomes(passed=1)
    assert "test_privacy" not in result.stdout.str()


# -- the marker on the score path ----------------------------------------------------------


def test_marker_on_scores_fails_tight_and_passes_loose(pytester):
    pytester.makepyfile(scores_data=SCORES_MODULE)
    pytester.makepyfile(
        """
        import pytest
        from scores_data import MEMBERS, SCORES

        @pytest.mark.privacy(max_auc=0.8, max_epsilon_lb=0.5)
        def test_tight(privacy_audit):
            privacy_audit.score(SCORES, MEMBERS, bootstrap=100, report=False)

        @pytest.mark.privacy(max_auc=0.99, max_tpr_at_1pct_fpr=0.99, max_epsilon_lb=100.0)
        def test_loose(privacy_audit):
            results = privacy_audit.score(SCORES, MEMBERS, bootstrap=100)
            assert 0.85 < results.max_auc < 0.99
            assert results.report_path.is_file() and results.results_path.is_file()
        """
    )
    result = run_inner(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_tight*",
            "*privacy thresholds exceeded*2 violation(s)*",
            "*AUC of attack 'user-scores' on 'user-scores' is 0.9*, above the threshold 0.8",
            "*empirical epsilon lower bound of attack 'user-scores'*above the threshold 0.5",
        ]
    )
    assert "test_loose FAILED" not in result.stdout.str()


def test_marked_test_without_results_fails_clearly(pytester):
    """No results: a clear failure. A malformed marker: an error before the body runs."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.privacy(max_auc=0.6)
        def test_forgot_to_audit(privacy_audit):
            pass

        @pytest.mark.privacy(max_auc=0.6)
        def test_no_fixture():
            pass

        @pytest.mark.privacy(max_acu=0.6)
        def test_typo(privacy_audit):
            raise RuntimeError("the body must not run with a bad marker")

        @pytest.mark.privacy()
        def test_no_threshold(privacy_audit):
            pass
        """
    )
    result = run_inner(pytester, "--strict-markers")
    result.assert_outcomes(failed=2, errors=2)  # a malformed marker is an error at setup
    out = result.stdout.str()
    assert out.count("but produced no audit results") >= 2  # the short summary may repeat it
    assert "call privacy_audit.run(config) or privacy_audit.score(scores, members)" in out
    assert "unknown argument 'max_acu'" in out
    assert "the body must not run" not in out
    assert "needs at least one of max_auc, max_tpr_at_1pct_fpr, max_epsilon_lb" in out


def test_body_failure_is_reported_unchanged(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.privacy(max_auc=0.6)
        def test_body_fails(privacy_audit):
            assert 1 == 2, "the test's own assertion"
        """
    )
    result = run_inner(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the test's own assertion*"])
    assert "produced no audit results" not in result.stdout.str()


def test_marker_is_registered_and_plugin_can_be_disabled(pytester):
    result = run_inner(pytester, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.privacy(max_auc=None, *"])
    result = run_inner(pytester, "--markers", "-p", "no:privacy_audit")
    assert "@pytest.mark.privacy" not in result.stdout.str()


# -- the results wrapper -------------------------------------------------------------------


def test_assert_within_lists_every_violation(privacy_audit):
    from privacy_audit.audit.integrations.gate import check

    scores, members = separable(n=800)  # TPR at 1% FPR resolvable: a number to hold
    results = privacy_audit.score(scores, members, bootstrap=100)
    limits = {"max_auc": 0.5, "max_tpr_at_1pct_fpr": 0.01, "max_epsilon_lb": 0.1}
    with pytest.raises(AssertionError) as info:
        results.assert_within(**limits)
    message = str(info.value)
    bullets = [line for line in message.splitlines() if line.startswith("  - ")]
    assert len(bullets) == 3 == len(check(results.raw, limits))
    for label in ("AUC", "TPR@1%FPR", "empirical epsilon lower bound"):
        assert any(line.startswith(f"  - {label} of attack") for line in bullets), label
    assert f"report: {results.report_path}" in message
    results.assert_within(max_auc=0.99, max_epsilon_lb=100.0)  # loose: passes


def test_results_span_every_run(privacy_audit):
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import PrivacyClaim

    def run(name, shift):
        scores, members = separable(shift=shift, seed=1)
        res = AttackResult.from_scores("loss", scores, members, settings=MetricSettings(n_boot=100))
        return run_record(name, "user-scores", PrivacyClaim.none(), None, [res])

    raw = assemble_results([run("leaky", 3.0), run("private", 0.0)], "two runs", 0, {})
    results = AuditResults(raw)
    leaky, private = results.run("leaky"), results.run("private")
    assert results.run_names == ["leaky", "private"]
    assert results.max_auc == leaky.max_auc > 0.95 > 0.6 > private.max_auc
    assert results.max_epsilon_lb == max(leaky.max_epsilon_lb, private.max_epsilon_lb)
    private.assert_within(max_auc=0.6)
    with pytest.raises(AssertionError, match="on 'leaky'"):
        results.assert_within(max_auc=0.6)
    with pytest.raises(KeyError, match="'leaky', 'private'"):
        results.run("missing")
    strict = results.run("private").violations(max_auc=0.5, strict=True)
    assert strict and all(v.run == "private" for v in strict)


def test_assert_within_fails_on_a_violated_claim_even_within_thresholds(privacy_audit):
    """Loose thresholds that every metric meets, but the run's ε audit contradicts its
    claim: the gate would fail, so the plugin's assertion (and marker) fails too."""
    import copy

    results = privacy_audit.score(*separable(shift=0.3), bootstrap=100, report=False)
    loose = {"max_auc": 0.999, "max_epsilon_lb": 100.0}
    results.assert_within(**loose)  # no claim: passes
    raw = copy.deepcopy(results.raw)
    run = raw["runs"][0]
    run["claim"] = {"epsilon": 0.5, "delta": 1e-5, "unit": "example", "notion": "central-dp"}
    run["epsilon_audit"] = {
        "status": "violated",
        "claimed_epsilon": 0.5,
        "evidence": [
            "gradient-canary: ε ≥ 2.1 (95% confidence, δ=1e-5) exceeds the claimed ε = 0.5"
        ],
        "audits": [],
    }
    violated = AuditResults(raw)
    found, failures = violated.problems(**loose)
    assert not found and [f.kind for f in failures] == ["claim-violated"]
    with pytest.raises(AssertionError, match="VIOLATED") as info:
        violated.assert_within(**loose)
    assert "gradient-canary: ε ≥ 2.1" in str(info.value)


def test_assert_within_rejects_bad_thresholds(privacy_audit):
    results = privacy_audit.score(*separable(), bootstrap=100, report=False)
    assert results.report_path is None and results.results_path is None
    with pytest.raises(ValueError, match="at least one"):
        results.assert_within()
    with pytest.raises(ValueError, match="finite"):
        results.assert_within(max_auc=float("nan"))


def test_score_rejects_bad_input(privacy_audit):
    with pytest.raises(ValueError, match="need both members and non-members"):
        privacy_audit.score([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="delta"):
        privacy_audit.score([0.1, 0.2], [1, 0], delta=2.0)
    assert privacy_audit.results == []


# -- run(): config resolution and the session cache -----------------------------------------

FAKE_RUN_CONFTEST = """
import pytest

CALLS = []


@pytest.fixture(autouse=True)
def fake_run_audit(monkeypatch):
    import numpy as np
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit import results, runner
    from privacy_audit.defenses.base import PrivacyClaim

    def run_audit(cfg, progress=True, epsilon=None):
        assert progress is False
        CALLS.append((cfg.seed, cfg.data["n_members"]))
        rng = np.random.default_rng(cfg.seed)
        scores = np.concatenate([rng.normal(1, 1, 50), rng.normal(0, 1, 50)])
        res = AttackResult.from_scores(
            "loss", scores, [1] * 50 + [0] * 50, settings=MetricSettings(n_boot=100)
        )
        run = results.run_record("dp-sgd", "dp-sgd", PrivacyClaim.none(), None, [res])
        return results.assemble_results([run], cfg.title, cfg.seed, cfg.to_dict())

    monkeypatch.setattr(runner, "run_audit", run_audit)
    return CALLS
"""

TINY_TOML = """
title = "cached"
seed = 0
[data]
n_members = 40
n_nonmembers = 40
[[defenses]]
name = "none"
"""


def test_run_caches_per_config_and_seed(pytester):
    pytester.makeconftest(FAKE_RUN_CONFTEST)
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "privacy.toml").write_text(TINY_TOML, encoding="utf-8")
    pytester.makepyfile(
        **{
            "sub/test_cache.py": """
            from pathlib import Path

            import pytest
            from privacy_audit.audit.config import tomllib

            RAW = tomllib.loads((Path(__file__).parent / "privacy.toml").read_text())

            @pytest.mark.privacy(max_auc=0.99)
            def test_first(privacy_audit, fake_run_audit):
                first = privacy_audit.run("privacy.toml")  # found next to the test file
                assert first.report_path.is_file() and first.results_path.is_file()
                assert fake_run_audit == [(0, 40)]

            def test_same_config_as_dict_is_cached(privacy_audit, fake_run_audit, tmp_path):
                again = privacy_audit.run(dict(RAW), out_dir=tmp_path / "out")
                assert fake_run_audit == [(0, 40)]
                assert again.report_path == tmp_path / "out" / "report.html"
                assert again.report_path.is_file()

            def test_other_seed_runs_again(privacy_audit, fake_run_audit):
                privacy_audit.run({**RAW, "seed": 1})
                assert fake_run_audit == [(0, 40), (1, 40)]

            def test_missing_config(privacy_audit):
                from privacy_audit.ground.errors import ConfigError

                with pytest.raises(ConfigError, match="not found next to the test"):
                    privacy_audit.run("nope.toml")
            """
        }
    )
    result = run_inner(pytester)
    result.assert_outcomes(passed=4)
