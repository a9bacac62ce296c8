"""Report stage before / after issue 38's plot change, side by side in one process.

Times ``build_context`` (every figure and table of report.html; process CPU time) on one
``results.json``, interleaving rounds of: the old renderer (``Figure.savefig``, which
draws a figure with a layout engine twice) and the new one (one draw on the Agg canvas,
PNG written by Pillow). Also counts figure draws per report. Usage::

    OMP_NUM_THREADS=1 nice -n 10 python tools/bench_report_plots.py RESULTS.json [ROUNDS]
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import time


def main(path: str, rounds: int = 5) -> dict:
    from matplotlib.figure import Figure

    from privacy_audit.reports import html, plots

    results = json.loads(open(path, encoding="utf-8").read())
    new_png = plots.png_bytes

    def old_png(fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=plots.DPI, metadata={"Software": None})
        fig.clear()
        return buf.getvalue()

    draws = {"n": 0}
    real_draw = Figure.draw

    def counted(self, renderer):
        draws["n"] += 1
        return real_draw(self, renderer)

    Figure.draw = counted
    cases = {"before (savefig)": old_png, "after (one draw)": new_png}
    times = {k: [] for k in cases}
    n_draws, sizes = {}, {}
    html.build_context(results)  # warm-up: imports, fonts
    for _ in range(rounds):
        for name, fn in cases.items():
            plots.png_bytes = fn
            draws["n"] = 0
            t = time.process_time()
            ctx = html.build_context(results)
            times[name].append(time.process_time() - t)
            n_draws[name] = draws["n"]
            sizes[name] = len(json.dumps(ctx, default=str))
    plots.png_bytes = new_png
    Figure.draw = real_draw
    out = {
        "results": path,
        "rounds": rounds,
        "cpu_s": {k: sorted(v) for k, v in times.items()},
        "median_cpu_s": {k: statistics.median(v) for k, v in times.items()},
        "figure_draws_per_report": n_draws,
        "report_context_chars": sizes,
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
