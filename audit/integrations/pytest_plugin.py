"""pytest plugin: privacy regression tests with the privacy-audit suite.

Registered through the ``pytest11`` entry point ``privacy_audit``, so it is active in every
pytest run of an environment where privacy-audit is installed; nothing needs importing.

It provides

- the ``privacy_audit`` fixture: ``privacy_audit.run(config)`` runs an audit config (a TOML
  path or a dict) and ``privacy_audit.score(scores, members)`` measures your own attack
  scores; both write ``report.html`` and ``results.json`` and return :class:`AuditResults`;
- the ``privacy`` marker: ``@pytest.mark.privacy(max_auc=..., max_tpr_at_1pct_fpr=...,
  max_epsilon_lb=..., strict=False)`` fails the test, after its body, when any audit
  result the test produced exceeds a threshold, listing every exceeded threshold.

Audits are cached per resolved config for the whole session, so several tests can share
one training run. Thresholds are compared by :func:`privacy_audit.audit.integrations.gate.check`, exactly as
``privacy-audit gate`` compares them. See ``docs/pytest-plugin.md``.

This module is imported by every pytest run once the package is installed, so it imports
nothing heavy at module level.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from privacy_audit.audit.integrations.gate_rules import Violation

MARKER = "privacy"
THRESHOLDS = ("max_auc", "max_tpr_at_1pct_fpr", "max_epsilon_lb")
_METRICS = {  # threshold name -> metric key in results.json (the same names as privacy_audit.audit.integrations.gate)
    "max_auc": "auc",
    "max_tpr_at_1pct_fpr": "tpr_at_fpr_0.01",
    "max_epsilon_lb": "epsilon_lower_bound",
}

_CACHE = pytest.StashKey[dict]()  # session: config key -> _CachedAudit
_PRODUCED = pytest.StashKey[list]()  # test item: every AuditResults the test produced


def _thresholds(
    where: str,
    max_auc: Any = None,
    max_tpr_at_1pct_fpr: Any = None,
    max_epsilon_lb: Any = None,
) -> dict[str, float | None]:
    """Validate thresholds: at least one, each a finite number (NaN would pass every check)."""
    given = {
        "max_auc": max_auc,
        "max_tpr_at_1pct_fpr": max_tpr_at_1pct_fpr,
        "max_epsilon_lb": max_epsilon_lb,
    }
    if all(v is None for v in given.values()):
        raise ValueError(f"{where} needs at least one of {', '.join(THRESHOLDS)}")
    for key, value in given.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: {key} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{where}: {key} must be a finite number, got {value!r}")
    return {k: (None if v is None else float(v)) for k, v in given.items()}


def _format_violations(title: str, violations: list[Violation], report: Path | None) -> str:
    lines = [f"privacy thresholds exceeded in {title!r}: {len(violations)} violation(s)"]
    lines += [f"  - {v}" for v in violations]
    if report is not None:
        lines.append(f"  report: {report}")
    return "\n".join(lines)


class AuditResults:
    """The results dictionary of one audit (``.raw``, the ``results.json`` schema) with the
    maxima the privacy thresholds are about and an assertion over them."""

    def __init__(
        self,
        raw: dict[str, Any],
        report_path: Path | None = None,
        results_path: Path | None = None,
    ):
        self.raw = raw
        self.report_path = report_path
        self.results_path = results_path

    # -- maxima over every run's attacks with status "ok" ------------------------------
    def _ok_attacks(self) -> list[dict[str, Any]]:
        return [
            att
            for run in self.raw.get("runs", [])
            for att in run.get("attacks", [])
            if att.get("status") == "ok"
        ]

    def _max(self, threshold: str) -> float | None:
        values = [
            ((att.get("metrics") or {}).get(_METRICS[threshold]) or {}).get("value")
            for att in self._ok_attacks()
        ]
        values = [float(v) for v in values if v is not None]
        return max(values) if values else None

    @property
    def max_auc(self) -> float | None:
        """Highest AUC over all runs' ok attacks (``None`` when no attack ran)."""
        return self._max("max_auc")

    @property
    def max_tpr_at_1pct_fpr(self) -> float | None:
        """Highest TPR at 1% FPR over all runs' ok attacks."""
        return self._max("max_tpr_at_1pct_fpr")

    @property
    def max_epsilon_lb(self) -> float | None:
        """Highest empirical ε lower bound over all runs' ok attacks."""
        return self._max("max_epsilon_lb")

    # -- runs ----------------------------------------------------------------------
    @property
    def run_names(self) -> list[str]:
        return [run["name"] for run in self.raw.get("runs", [])]

    def run(self, name: str) -> AuditResults:
        """The same view restricted to one run (one defense), by its display name."""
        for run in self.raw.get("runs", []):
            if run["name"] == name:
                return AuditResults(
                    {**self.raw, "runs": [run]}, self.report_path, self.results_path
                )
        raise KeyError(f"no run named {name!r}; runs: {', '.join(map(repr, self.run_names))}")

    # -- thresholds -----------------------------------------------------------------
    def violations(
        self,
        max_auc: float | None = None,
        max_tpr_at_1pct_fpr: float | None = None,
        max_epsilon_lb: float | None = None,
        *,
        strict: bool = False,
    ) -> list[Violation]:
        """Every threshold violation, as ``privacy-audit gate`` finds them. A failure the
        gate never lets pass (an unmeasured metric, a violated claim, a shifted split, an
        inverted attack) raises ``DataError`` instead of vanishing from the list;
        :meth:`problems` returns those as values."""
        from privacy_audit.audit.integrations.gate import check

        limits = _thresholds("thresholds", max_auc, max_tpr_at_1pct_fpr, max_epsilon_lb)
        return check(self.raw, limits, strict=strict)

    def problems(
        self,
        max_auc: float | None = None,
        max_tpr_at_1pct_fpr: float | None = None,
        max_epsilon_lb: float | None = None,
        *,
        strict: bool = False,
        allow_shifted_split: bool = False,
    ) -> tuple[list[Violation], list]:
        """``(violations, failures)`` exactly as ``privacy-audit gate`` finds them
        (:func:`privacy_audit.audit.integrations.gate.check_all`)."""
        from privacy_audit.audit.integrations.gate import check_all

        limits = _thresholds("thresholds", max_auc, max_tpr_at_1pct_fpr, max_epsilon_lb)
        return check_all(
            self.raw,
            limits,
            strict=strict,
            allow_empty=True,
            allow_shifted_split=allow_shifted_split,
        )

    def assert_within(
        self,
        max_auc: float | None = None,
        max_tpr_at_1pct_fpr: float | None = None,
        max_epsilon_lb: float | None = None,
        *,
        strict: bool = False,
        allow_shifted_split: bool = False,
    ) -> None:
        """Raise ``AssertionError`` listing every exceeded threshold (point values; with
        ``strict`` the upper end of each CI, as ``gate --strict``) and every failure the
        gate never lets pass: a violated privacy claim, a requested metric not measured,
        an inconclusive verdict under ``strict``, a shifted member / non-member split
        unless ``allow_shifted_split``. An audit in which no attack produced a result also
        fails: nothing was measured."""
        found, failures = self.problems(
            max_auc,
            max_tpr_at_1pct_fpr,
            max_epsilon_lb,
            strict=strict,
            allow_shifted_split=allow_shifted_split,
        )
        if found or failures:
            title = self.raw.get("title", "audit")
            text = _format_violations(title, found, None) if found else ""
            if failures:
                lines = [f"privacy gate failures in {title!r}: {len(failures)}"]
                lines += [f"  - {f}" for f in failures]
                text = "\n".join([t for t in (text, "\n".join(lines)) if t])
            if self.report_path is not None:
                text += f"\n  report: {self.report_path}"
            raise AssertionError(text)
        if not self._ok_attacks():
            raise AssertionError(
                f"no attack produced a result in {self.raw.get('title', 'audit')!r}: "
                "nothing was measured, so no threshold can be checked"
            )

    def __repr__(self) -> str:
        def fmt(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}"

        return (
            f"<AuditResults {self.raw.get('title', '')!r} runs={self.run_names} "
            f"max_auc={fmt(self.max_auc)} max_tpr_at_1pct_fpr={fmt(self.max_tpr_at_1pct_fpr)} "
            f"max_epsilon_lb={fmt(self.max_epsilon_lb)}>"
        )


class _CachedAudit:
    """One audit's results dictionary and where its outputs were written."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.written: dict[Path, tuple[Path, Path]] = {}  # out_dir -> (report, results)


class PrivacyAudit:
    """The ``privacy_audit`` fixture: run audits and measure scores inside a test."""

    def __init__(self, request: pytest.FixtureRequest):
        self._request = request
        self._cache: dict[str, _CachedAudit] = request.config.stash.setdefault(_CACHE, {})
        self.results: list[AuditResults] = request.node.stash.setdefault(_PRODUCED, [])

    @property
    def last(self) -> AuditResults | None:
        """The most recent results this test produced."""
        return self.results[-1] if self.results else None

    def _test_dir(self) -> Path:
        path = getattr(self._request.node, "path", None)
        return Path(path).parent if path is not None else Path.cwd()

    def _default_out(self) -> Path:
        return Path(self._request.getfixturevalue("tmp_path"))

    def _load(self, config: str | Path | dict[str, Any]):
        from privacy_audit.audit.config import load_config, parse_config
        from privacy_audit.ground.errors import ConfigError

        if isinstance(config, dict):
            return parse_config(
                config, source=f"<dict in {self._request.node.nodeid}>", base_dir=self._test_dir()
            )
        if not isinstance(config, (str, Path)):
            raise TypeError(f"config must be a TOML path or a dict, got {type(config).__name__}")
        p = Path(config).expanduser()
        if not p.is_absolute():
            candidates = [self._test_dir() / p, Path.cwd() / p]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise ConfigError(
                    f"config file {str(config)!r} not found next to the test "
                    f"({candidates[0].parent}) or in the working directory ({Path.cwd()})"
                )
            p = found
        return load_config(p)

    def _produce(
        self,
        raw: dict[str, Any],
        out_dir: str | Path | None,
        write: bool,
        entry: _CachedAudit | None = None,
    ) -> AuditResults:
        from privacy_audit.audit.results import write_outputs

        report: Path | None
        results: Path | None
        if not write:
            report, results = None, None
        elif out_dir is None and entry is not None and entry.written:
            report, results = next(iter(entry.written.values()))  # reuse the first report
        else:
            out = Path(out_dir) if out_dir is not None else self._default_out()
            out = out.resolve()
            if entry is not None and out in entry.written:
                report, results = entry.written[out]
            else:
                report, results = write_outputs(raw, out)
                if entry is not None:
                    entry.written[out] = (report, results)
        produced = AuditResults(raw, report, results)
        self.results.append(produced)
        return produced

    def run(
        self,
        config: str | Path | dict[str, Any],
        out_dir: str | Path | None = None,
        *,
        epsilon: bool | None = None,
        report: bool = True,
    ) -> AuditResults:
        """Run an audit config (a TOML path, relative to the test file or the working
        directory, or a dict as parsed from TOML) with progress off; write ``report.html``
        and ``results.json`` into ``out_dir`` (default: this test's ``tmp_path``).

        Results are cached for the session by the resolved config (seed included), so
        tests running the same config share one audit; without ``out_dir`` they also share
        the report written by the first. ``epsilon`` turns the claimed-vs-audited ε audits
        on or off (default: the config's ``[epsilon] enabled``); ``report=False`` writes
        nothing (``report_path`` is then ``None``).
        """
        from privacy_audit.audit.runner import run_audit

        cfg = self._load(config)
        resolved = {k: v for k, v in cfg.to_dict().items() if k != "source"}
        key = json.dumps({"config": resolved, "epsilon": epsilon}, sort_keys=True, default=str)
        entry = self._cache.get(key)
        if entry is None:
            entry = _CachedAudit(run_audit(cfg, progress=False, epsilon=epsilon))
            self._cache[key] = entry
        return self._produce(entry.raw, out_dir, report, entry)

    def score(
        self,
        scores: Any,
        members: Any,
        ids: list[str] | None = None,
        delta: float = 1e-5,
        *,
        name: str = "user-scores",
        bootstrap: int = 1000,
        seed: int = 0,
        out_dir: str | Path | None = None,
        report: bool = True,
    ) -> AuditResults:
        """Metrics, ε lower bound and report for your own membership scores (higher =
        member; ``members`` is 1 for members, 0 for non-members), as ``privacy-audit
        score`` computes them; ``report.html`` and ``results.json`` go to ``out_dir``
        (default: this test's ``tmp_path``), or nowhere with ``report=False``."""
        from privacy_audit.attacks.base import AttackResult, MetricSettings
        from privacy_audit.audit.results import assemble_results, run_record
        from privacy_audit.defenses.base import PrivacyClaim

        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        if bootstrap < 100:
            raise ValueError(f"bootstrap must be at least 100, got {bootstrap}")
        settings = MetricSettings(delta=delta, n_boot=bootstrap, seed=seed)
        result = AttackResult.from_scores(
            "user-scores", scores, members, ids, settings, "Scores supplied by the test."
        )
        run = run_record(
            name,
            "user-scores",
            PrivacyClaim.none("Scores supplied by the test; no claim stated."),
            None,
            [result],
        )
        config = {
            "source": self._request.node.nodeid,
            "command": "score",
            "delta": delta,
            "bootstrap": bootstrap,
            "seed": seed,
        }
        raw = assemble_results([run], f"Privacy audit of {name}", seed, config)
        return self._produce(raw, out_dir, report)


@pytest.fixture
def privacy_audit(request: pytest.FixtureRequest) -> PrivacyAudit:
    """Run privacy audits in a test: ``privacy_audit.run(config)``,
    ``privacy_audit.score(scores, members)``; both return :class:`AuditResults`."""
    return PrivacyAudit(request)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(max_auc=None, max_tpr_at_1pct_fpr=None, max_epsilon_lb=None, strict=False, "
        "allow_shifted_split=False): "
        "fail the test when an audit it ran (privacy_audit.run/score) exceeds a threshold",
    )
    config.stash.setdefault(_CACHE, {})


def _marker_thresholds(item: pytest.Item, marker: pytest.Mark) -> tuple[dict, dict]:
    where = f"@pytest.mark.{MARKER} on {item.nodeid}"
    if marker.args:
        raise ValueError(f"{where} takes keyword arguments only, e.g. max_auc=0.6")
    kwargs = dict(marker.kwargs)
    flags = {}
    for flag in ("strict", "allow_shifted_split"):
        flags[flag] = kwargs.pop(flag, False)
        if not isinstance(flags[flag], bool):
            raise ValueError(f"{where}: {flag} must be True or False, got {flags[flag]!r}")
    unknown = sorted(set(kwargs) - set(THRESHOLDS))
    if unknown:
        raise ValueError(
            f"{where}: unknown argument {unknown[0]!r}; allowed: {', '.join(THRESHOLDS)}, "
            "strict, allow_shifted_split"
        )
    return _thresholds(where, **kwargs), flags


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A malformed privacy marker is an error at setup: the test body does not run."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return
    try:
        _marker_thresholds(item, marker)
    except ValueError as exc:
        problem = str(exc)
    else:
        return
    pytest.fail(problem, pytrace=False)  # outside the except: no chained traceback


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Check a marked test's audit results after its body.

    ``trylast`` runs this after pytest's own ``pytest_runtest_call`` has run the test body,
    and only when the body passed (an exception from it ends the call phase first), so a
    violation is reported as an ordinary failure of the test, in its call phase.
    """
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return
    limits, flags = _marker_thresholds(item, marker)
    produced: list[AuditResults] = item.stash.get(_PRODUCED, [])
    if not produced:
        pytest.fail(
            f"{item.nodeid} is marked @pytest.mark.{MARKER} but produced no audit results: "
            "call privacy_audit.run(config) or privacy_audit.score(scores, members) in the test",
            pytrace=False,
        )
    failures, seen = [], set()
    for results in produced:
        if id(results.raw) in seen:  # the same (cached) audit produced twice: check it once
            continue
        seen.add(id(results.raw))
        try:
            results.assert_within(**limits, **flags)
        except AssertionError as exc:
            failures.append(str(exc))
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
