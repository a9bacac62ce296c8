"""Number formatting shared by the verdicts, the plots and the HTML report.

All functions are total: they accept ``None``, NaN, infinities, booleans and
non-numeric values and always return a display string.
"""

from __future__ import annotations

import base64
import math
from typing import Any

DASH = "\u2014"  # em dash: "no value"


def text_or(value: Any, default: str = DASH) -> str:
    """``str(value)``, or ``default`` for a missing value."""
    if value is None:
        return default
    return str(value)


def data_uri(png: bytes) -> str:
    """A PNG embedded in the page (``data:image/png;base64,...``)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def as_float(x: Any) -> float | None:
    """``x`` as a float, or ``None`` for missing, NaN, booleans and non-numbers.

    Infinities are kept (callers decide what an infinite value means).
    """
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    if math.isnan(v):
        return None
    return v


def as_finite(x: Any) -> float | None:
    """Like :func:`as_float` but infinities also become ``None``."""
    v = as_float(x)
    return v if v is not None and math.isfinite(v) else None


def num(x: Any, sig: int = 3) -> str:
    """Format a number to ``sig`` significant digits, keeping trailing zeros.

    >>> num(0.7123), num(0.7), num(12.0), num(1e-5), num(None), num(500)
    ('0.712', '0.700', '12.0', '1.00e-5', '—', '500')
    """
    if x is None:
        return DASH
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    v = as_float(x)
    if v is None:
        try:
            if math.isnan(float(x)):
                return "n/a"
        except (TypeError, ValueError):
            pass
        return str(x)
    if math.isinf(v):
        return "\u221e" if v > 0 else "\u2212\u221e"
    if v == 0:
        return "0"
    if abs(v) >= 10 ** max(sig, 4):
        return f"{v:,.0f}"
    s = f"{v:#.{sig}g}"
    if "e" in s:
        mantissa, exp = s.split("e")
        mantissa = mantissa.rstrip(".")
        return f"{mantissa}e{int(exp)}"
    return s.rstrip(".")


def small(x: Any) -> str:
    """Format a small probability such as a DP delta compactly: ``1e-5``."""
    v = as_float(x)
    if v is None:
        return DASH if x is None else str(x)
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        return num(v)
    mantissa, exp = f"{v:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exp)}"


def ci(metric: Any, sig: int = 3) -> str:
    """``"0.712 [0.681, 0.744]"`` from ``{"value", "ci_low", "ci_high"}``.

    A missing bound is shown as ``—``; a missing metric as ``—``; a TPR at an FPR
    below the data's resolution (1 / non-members) as ``below resolution (1/n = …)``.
    """
    if isinstance(metric, dict) and metric.get("below_resolution"):
        res = as_float(metric.get("resolution"))
        return "below resolution" + (f" (1/n = {num(res, 2)})" if res is not None else "")
    if not isinstance(metric, dict) or as_float(metric.get("value")) is None:
        return DASH
    value = num(metric.get("value"), sig)
    lo, hi = metric.get("ci_low"), metric.get("ci_high")
    if lo is None and hi is None:
        return value
    return f"{value} [{num(lo, sig)}, {num(hi, sig)}]"


def pct(x: Any, decimals: int = 1) -> str:
    """A fraction as a percentage number without the sign: ``0.0981 -> '9.8'``."""
    v = as_float(x)
    if v is None:
        return DASH
    return f"{100.0 * v:.{decimals}f}"


def pct_ci(metric: Any) -> str:
    """``"9.8% [6.2, 13.1]"`` from a metric dict holding fractions."""
    if not isinstance(metric, dict) or as_float(metric.get("value")) is None:
        return DASH
    value = f"{pct(metric.get('value'))}%"
    lo, hi = metric.get("ci_low"), metric.get("ci_high")
    if lo is None and hi is None:
        return value
    return f"{value} [{pct(lo)}, {pct(hi)}]"
