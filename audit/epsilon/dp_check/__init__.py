"""Test the user's own DP-SGD code: ``privacy-audit dp-check``, :func:`dp_check` and
:func:`assert_dp` (docs/dp-check.md).

The checks measure the parts of a DP-SGD step directly on fresh instances of the user's
setup (their Opacus ``make_private``, any DPOptimizer subclass, any data loader; or any
code through the ``privatize`` protocol): one example's effect on the release with the
noise replayed exactly (:mod:`.mechanism`), the noise's scale, shape and independence,
which tensors are clipped and noised, the sampler's real scheme (:mod:`.sampling`), the
model's own forward pass (:mod:`.model_checks`), and the ε of what was measured as a
sound lower bound (:mod:`.accounting`, :mod:`.verdict`). Modules: ``contract`` (SETUP.py),
``harness`` (instances, replayed noise, the release), ``run`` (the phases and budget),
``finding`` and ``findings_*`` (the findings, family by family, that :mod:`.verdict`
reads), ``command`` (the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DPCheckResult:
    """The results record of one dp-check, with the fields a test reads most."""

    record: dict[str, Any]

    @property
    def verdict(self) -> str:
        """``consistent``, ``violated`` or ``inconclusive``."""
        return str(self.record["verdict"])

    @property
    def headline(self) -> str:
        return str(self.record["headline"])

    @property
    def exit_code(self) -> int:
        return int(self.record["exit_code"])

    @property
    def findings(self) -> list[dict[str, Any]]:
        return list(self.record["findings"])

    @property
    def violations(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["severity"] == "violation"]

    @property
    def epsilon_lower(self) -> float | None:
        """The sound lower bound on the ε of what the code releases (inf when unbounded,
        None when no sound bound applies)."""
        e = self.record["epsilon"].get("measured", {}).get("epsilon_lower") or {}
        if e.get("infinite"):
            return float("inf")
        return e.get("value")

    @property
    def sigma_eff(self) -> dict[str, float]:
        return dict(self.record["epsilon"].get("measured", {}).get("sigma_eff", {}))

    def check(self, name: str) -> str:
        """The status of one check (``passed``, ``violated``, ``not-tested`` ...)."""
        for c in self.record["checks"]:
            if c["name"] == name:
                return str(c["status"])
        raise KeyError(name)

    def summary(self) -> str:
        from privacy_audit.audit.epsilon.dp_check.summary import summary

        return summary(self.record)

    def write(self, out: str | Path) -> list[Path]:
        """report.html and results.json into ``out``, atomically, as the CLI writes them."""
        from privacy_audit.ground.io import dumps_json, publish_together
        from privacy_audit.reports.dp_check_view import render_dp_check

        return publish_together(
            out,
            [
                ("report.html", render_dp_check(self.record)),
                ("results.json", dumps_json(self.record)),
            ],
        )


def dp_check(
    setup: Any,
    budget: float | None = None,
    seed: int = 0,
    progress: bool = False,
    accept_untested: tuple[str, ...] = (),
    end_to_end: bool = False,
) -> DPCheckResult:
    """Run every check on ``setup``: a SETUP.py path, an imported module, or any object
    with the contract's names (``make_dataset``, ``make_private``, ``CLAIM`` ...).
    ``end_to_end`` also runs the many-run audits with the budget left."""
    from privacy_audit.audit.epsilon.dp_check.run import DEFAULT_BUDGET, check

    return DPCheckResult(
        check(
            setup,
            budget=DEFAULT_BUDGET if budget is None else budget,
            seed=seed,
            progress=progress,
            accept_untested=tuple(accept_untested),
            end_to_end=end_to_end,
        )
    )


def assert_dp(
    setup: Any,
    budget: float | None = None,
    seed: int = 0,
    accept_untested: tuple[str, ...] = (),
    allow_inconclusive: bool = False,
) -> DPCheckResult:
    """For CI: fail (AssertionError with the findings and where to look) unless the setup
    is consistent with its claim. ``allow_inconclusive`` lets an inconclusive result pass
    (it never lets a violation pass)::

        def test_my_dp_training_is_private():
            assert_dp("train/dp_setup.py", budget=120)
    """
    result = dp_check(setup, budget=budget, seed=seed, accept_untested=accept_untested)
    if result.verdict == "violated" or (
        result.verdict == "inconclusive" and not allow_inconclusive
    ):
        raise AssertionError(result.summary())
    return result


__all__ = ["DPCheckResult", "assert_dp", "dp_check"]
