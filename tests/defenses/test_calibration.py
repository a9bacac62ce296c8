"""Noise calibration ends: the same σ as Opacus's search, and a clear one-line error
(exit 2) instead of minutes of work past its iteration or time bound (issue 17)."""

from __future__ import annotations

import time
import warnings

import pytest

from privacy_audit.defenses.calibration import CalibrationError, bounded_noise_multiplier


@pytest.mark.parametrize("eps, sr, steps", [(8, 0.25, 40), (1, 0.1, 100), (1e8, 0.125, 240)])
def test_same_sigma_as_opacus(eps, sr, steps):
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = get_noise_multiplier(
            target_epsilon=eps, target_delta=1e-5, sample_rate=sr, steps=steps, accountant="rdp"
        )
    got = bounded_noise_multiplier(
        target_epsilon=eps, target_delta=1e-5, sample_rate=sr, steps=steps, accountant="rdp"
    )
    assert got == want


def test_huge_epsilon_stops_at_the_iteration_bound():
    start = time.perf_counter()
    with pytest.raises(CalibrationError, match="did not converge within 200 steps"):
        bounded_noise_multiplier(
            target_epsilon=1e308, target_delta=1e-5, sample_rate=0.25, steps=40, accountant="rdp"
        )
    assert time.perf_counter() - start < 60


def test_tiny_epsilon_and_the_time_bound():
    with pytest.raises(CalibrationError, match="too low to calibrate"):
        bounded_noise_multiplier(
            target_epsilon=1e-300, target_delta=1e-5, sample_rate=0.25, steps=40, accountant="rdp"
        )
    with pytest.raises(CalibrationError, match=r"or 0\.001 s"):
        bounded_noise_multiplier(
            target_epsilon=1.0,
            target_delta=1e-5,
            sample_rate=0.25,
            steps=40,
            accountant="rdp",
            max_seconds=0.001,
        )


def test_calibration_is_memoised_and_errors_are_not(monkeypatch):
    """A repeated calibration returns the same σ without evaluating the accountant again
    (a many-runs audit calibrates once per schedule); a failed one is not remembered."""
    import opacus.accountants

    kw = dict(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.5, steps=3, accountant="rdp")
    first = bounded_noise_multiplier(**kw)
    monkeypatch.setattr(opacus.accountants, "create_accountant", lambda **_: 1 / 0)
    assert bounded_noise_multiplier(**kw) == first
    with pytest.raises(ZeroDivisionError):  # a new schedule searches (and here fails)
        bounded_noise_multiplier(**{**kw, "steps": 4})
    monkeypatch.undo()
    assert bounded_noise_multiplier(**{**kw, "steps": 4}) > 0
