"""``privacy-audit bench score``: the ``score`` command beside one sort of its scores.

Cases, timed side by side in one process (round-robin, process CPU time), at ``rows``,
``rows / 10`` and ``rows / 100`` rows (10^6, 10^5, 10^4 by default):

* ``one-sort@N`` (reference): ``numpy.argsort`` of the N scores;
* ``score@N``: the whole ``privacy-audit score FILE --out DIR`` (reading the CSV, every
  metric with 1,000 bootstrap resamples, report.html and results.json written), through
  the CLI's ``main`` in this process (imports are paid once, in a warm-up on a small
  file). Target at 10^6: <= 600x ``one-sort``;
* ``score-text@N``: the same command on the same rows with a ``text`` column (the text
  column adds the exact-duplicate removal and the split check: the exact near-duplicate
  join over every text and the blind baseline on at most 1,000 texts per class).
  Targets at 10^6: ``score-text / score`` <= 3x, and so ``score-text /
  one-sort`` <= 1,800x (3 x 600x);
* ``score-prose@N`` / ``score-text-prose@N``: the same two on real sentences (pydoc
  topics, installed packages' descriptions, Debian changelogs; at most ``rows / 10``, as
  many as there are distinct ones).

Scores: members ~ N(0.5, 1), non-members ~ N(0, 1), half each, rows shuffled; benchmark
texts: 8-30 words ``w<k>`` from a 20,000-word vocabulary (12 distinct characters; the
join's worst case, like templated text). The largest size is timed once per case; the
smaller ones ``min(repeats, 3)`` times. ``--sequences N`` sets ``rows`` (default 10^6;
``--quick`` 10^4).
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, time_cases


def bench_texts(n_rows: int, rng: np.random.Generator) -> list[str]:
    """8-30 words ``w<k>``, k < 20,000: low-entropy text (12 distinct characters)."""
    lengths = rng.integers(8, 31, size=n_rows)
    words = rng.integers(0, 20_000, size=int(lengths.sum())).tolist()
    out, pos = [], 0
    for k in lengths.tolist():
        out.append(" ".join(f"w{w}" for w in words[pos : pos + k]))
        pos += k
    return out


def real_sentences(limit: int, seed: int) -> list[str]:
    """Distinct real sentences (40-200 characters) shipped on this machine: pydoc topics,
    installed packages' descriptions, Debian changelogs; a seeded sample of ``limit``."""
    import glob
    import gzip
    import pydoc_data.topics as topics
    from importlib import metadata

    paras = []
    for t in topics.topics.values():
        paras += [" ".join(p.split()) for p in t.split("\n\n")]
    for d in metadata.distributions():
        paras += [" ".join(p.split()) for p in (d.metadata.get_payload() or "").split("\n\n")]
    for f in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz")):
        with contextlib.suppress(OSError, EOFError):
            paras += [
                " ".join(p.split())
                for p in gzip.open(f, "rt", errors="replace").read().split("\n\n")
            ]
    sents = list(dict.fromkeys(s[:200] for p in paras for s in p.split(". ") if len(s) >= 40))
    rng = np.random.default_rng(seed)
    return [sents[i] for i in rng.permutation(len(sents))[:limit]]


def write_scores_csv(path: Path, n_rows: int, seed: int, text, prose=None) -> np.ndarray:
    """A scores file of ``n_rows`` rows (with a ``text`` column when ``text``: the
    benchmark texts, or ``prose``); returns the scores (row order)."""
    import csv

    rng = np.random.default_rng(seed)
    half = n_rows // 2
    s = np.r_[rng.normal(0.5, 1.0, half), rng.normal(0.0, 1.0, n_rows - half)]
    m = np.r_[np.ones(half, dtype=int), np.zeros(n_rows - half, dtype=int)]
    order = rng.permutation(n_rows)
    s, m = s[order], m[order]
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["score", "member", "id"] + (["text"] if text else []))
        ids = (f"r{i}" for i in range(n_rows))
        if text:
            texts = prose if prose is not None else bench_texts(n_rows, rng)
            w.writerows(zip(s.tolist(), m.tolist(), ids, texts, strict=True))
        else:
            w.writerows(zip(s.tolist(), m.tolist(), ids, strict=True))
    return s


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.audit.cli import main
    from privacy_audit.stats import split_check
    from privacy_audit.stats.shingles import JOIN_STATS

    rows = int(settings.extra.get("sequences", 10_000 if settings.quick else 1_000_000))
    sizes = sorted({max(rows // d, 200) for d in (1, 10, 100)}, reverse=True)
    work = Path(tempfile.mkdtemp(prefix="bench-score-"))
    prose = real_sentences(max(rows // 10, 200), settings.seed)
    n_prose = len(prose)
    runs = {"n": 0}
    join: dict[str, dict] = {}
    last: dict[str, int] = {}
    near_duplicates = split_check.near_duplicates

    def counted(*args, **kwargs):  # the join's counts of the member/non-member check
        out = near_duplicates(*args, **kwargs)
        last.clear()
        last.update(JOIN_STATS)
        return out

    def score(name: str):
        def call():
            runs["n"] += 1
            out = work / f"out-{runs['n']}"
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                rc = main(["score", str(work / name), "--out", str(out)])
            if rc != 0:
                raise RuntimeError(f"score {name} exited {rc}")
            if name.startswith("t"):
                join[name] = dict(last)

        return call

    groups = []
    for n in sizes:
        scores = write_scores_csv(work / f"s{n}.csv", n, settings.seed, text=False)
        write_scores_csv(work / f"t{n}.csv", n, settings.seed, text=True)
        groups.append(
            {
                f"one-sort@{n}": (lambda sc=scores: np.argsort(sc)),
                f"score@{n}": score(f"s{n}.csv"),
                f"score-text@{n}": score(f"t{n}.csv"),
            }
        )
    write_scores_csv(work / "sp.csv", n_prose, settings.seed, text=False)
    write_scores_csv(work / "tp.csv", n_prose, settings.seed, text=True, prose=prose)
    groups.append(
        {
            f"one-sort@{n_prose}-prose": lambda: None,
            f"score-prose@{n_prose}": score("sp.csv"),
            f"score-text-prose@{n_prose}": score("tp.csv"),
        }
    )
    del groups[-1][f"one-sort@{n_prose}-prose"]
    # imports and caches: one untimed call of each command on the smallest files
    score(f"s{sizes[-1]}.csv")()
    score(f"t{sizes[-1]}.csv")()
    load_before = os.getloadavg()
    repeats = max(1, min(settings.repeats, 3))
    timings = {}
    split_check.near_duplicates = counted
    try:
        for i, cases in enumerate(groups):
            reps = 1 if (i == 0 and len(sizes) > 1 and sizes[0] >= 1_000_000) else repeats
            timings |= time_cases(cases, reps, 0, clock=time.process_time)
    finally:
        split_check.near_duplicates = near_duplicates
    med = {k: v.median_s for k, v in timings.items()}
    ratios: dict[str, float] = {}
    for n in sizes:
        ratios[f"score@{n} / one-sort@{n}"] = med[f"score@{n}"] / med[f"one-sort@{n}"]
        ratios[f"score-text@{n} / one-sort@{n}"] = med[f"score-text@{n}"] / med[f"one-sort@{n}"]
        ratios[f"score-text@{n} / score@{n}"] = med[f"score-text@{n}"] / med[f"score@{n}"]
    ratios[f"score-text-prose@{n_prose} / score-prose@{n_prose}"] = (
        med[f"score-text-prose@{n_prose}"] / med[f"score-prose@{n_prose}"]
    )
    return BenchResult(
        name="score",
        reference=f"one-sort@{sizes[0]}",
        cases={k: v.summary() for k, v in timings.items()},
        ratios=ratios,
        setup={
            "rows": sizes,
            "prose_rows": n_prose,
            "bootstrap": 1000,
            "repeats": {"largest": 1 if sizes[0] >= 1_000_000 else repeats, "others": repeats},
            "clock": "process CPU time",
            "load_average_before": list(load_before),
            "load_average_after": list(os.getloadavg()),
            "near_duplicate_join": join,
        },
        targets={
            f"score@{sizes[0]}": "<= 600x one-sort",
            f"score-text@{sizes[0]}": "<= 3x score, i.e. <= 1,800x one-sort",
        },
        notes=[
            "score: the whole command in this process: CSV read, metrics with 1,000 "
            "resamples, report.html and results.json written.",
            "score-text: the text column adds exact-duplicate removal and the split check "
            "(exact near-duplicate join over every text, the blind classifier on at most "
            "1,000 texts per class). Benchmark texts: 8-30 words 'w<k>' from a 20,000-word "
            "vocabulary (12 distinct characters), the join's worst case; prose: distinct "
            "real sentences.",
            "near_duplicate_join: the partition join's counts in the last timed call per "
            "file (texts, overflow texts, keys, key-sharing entry pairs, candidates left by "
            "the filters, distinct candidates verified).",
        ],
    )
