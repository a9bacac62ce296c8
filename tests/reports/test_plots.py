"""Report figures are drawn once each (issue 38, item 4), and the one-draw PNG shows the
same picture as matplotlib's own ``savefig`` (the independent reference)."""

from __future__ import annotations

import io

import numpy as np


def _figure():
    from privacy_audit.reports import plots

    fig, axes = plots.new_figure(5, 3, ncols=2)
    x = np.linspace(0, 1, 50)
    axes[0].plot(x, x**2, label="a long legend label")
    axes[0].set_title("a title that constrained layout must fit")
    axes[0].legend()
    axes[1].hist(np.random.default_rng(0).normal(size=300), bins=20)
    axes[1].set_xlabel("score")
    return fig


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def test_a_report_figure_is_drawn_once_and_equals_savefig(monkeypatch):
    from matplotlib.figure import Figure

    from privacy_audit.reports import plots

    ref = io.BytesIO()
    _figure().savefig(ref, format="png", dpi=plots.DPI)
    draws = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, r: (draws.append(1), real(self, r))[1])
    png = plots.png_bytes(_figure())
    assert len(draws) == 1
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and b"Software" not in png
    a, b = _pixels(png), _pixels(ref.getvalue())
    assert a.shape == b.shape
    # the same layout and picture: equal pixels but for anti-aliasing noise
    assert np.mean(np.abs(a - b) > 8) < 0.002, np.mean(np.abs(a - b) > 8)
