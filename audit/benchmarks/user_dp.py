"""``privacy-audit bench user-dp``: user-level DP-SGD audited end to end by canary users.

Setup (natural users on real text): Debian changelog entries on this machine grouped by
their maintainer's e-mail (the signature line ` -- Name <email>  date`), maintainers with
at least 3 entries, at most 20 entries each; features are a hashed bag of words (512
buckets, L2-normalised), the task "does the entry mention a new upstream release"; the
model a linear softmax classifier (1,026 parameters). Without the changelogs a seeded
synthetic grouped data set of the same shape is used (recorded in ``setup.data``).

Two trainers, the same claim (user-level ε from the accountant over users):
- ``user-dp-sgd``: :func:`privacy_audit.defenses.user_dp_sgd.train_user_dp`, per-user clip;
- ``per-example-clip`` (PLANTED BUG): the same code with ``clip_unit="example"``, a user
  with k records then has sensitivity k·C; its real user-level ε is the accountant's at σ/k.

Per seed, one run of each trainer with ``canaries`` white-box canary users of ``records``
records each (inserted with probability ½) and the one-run user-level audit
(:func:`privacy_audit.audit.epsilon.canary_users.one_run_user_audit`). Reported: VIOLATED k/n
with the two-sided Clopper–Pearson 95 % interval, the bounds' median and the ceiling.
Also the many-runs audit: per seed, 100 runs with and 100 without ONE canary user on a
crafted 40-user dataset. Sizes: 100 seeds (one-run) and 10 (many runs); ``--quick``: 3 and
1 (20 runs per side), for smoke runs only. ``settings.extra`` keys ``seeds``,
``canary_users``, ``records``, ``many_run_seeds``, ``many_runs`` override them.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings

BUCKETS = 512


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided exact interval for a binomial rate."""
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def debian_users(min_texts: int = 3, max_texts: int = 20) -> list[tuple[str, str]]:
    """(maintainer e-mail, entry text) of Debian changelog entries on this machine."""
    import glob
    import gzip
    import re

    by_user: dict[str, list[str]] = {}
    for path in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz")):
        try:
            text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for block in re.split(r"\n(?=\S)", text):
            m = re.search(r"^ -- .*?<([^>]+)>", block, re.M)
            if not m:
                continue
            body = " ".join(
                ln.strip()
                for ln in block.splitlines()[1:]
                if ln.strip() and not ln.startswith(" -- ")
            )
            if len(body.split()) >= 4:
                by_user.setdefault(m.group(1).lower(), []).append(body)
    return [
        (u, t)
        for u, texts in sorted(by_user.items())
        if len(texts) >= min_texts
        for t in texts[:max_texts]
    ]


def features(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Hashed bag of words (``BUCKETS``, L2-normalised; crc32, so stable across runs) and
    the label 'mentions upstream'."""
    import re
    import zlib

    x = np.zeros((len(texts), BUCKETS), np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z]+", t.lower()):
            x[i, zlib.crc32(w.encode()) % BUCKETS] += 1.0
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
    y = np.array(["upstream" in t.lower() for t in texts], np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def synthetic_users(
    n_users: int = 300, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Seeded grouped data of the same shape (fallback when no changelogs are installed)."""
    rng = np.random.default_rng([seed, 0x05E])
    counts = rng.integers(3, 21, n_users)
    users = np.repeat(np.arange(n_users), counts)
    centre = rng.normal(size=(n_users, BUCKETS))[users]
    x = centre + rng.normal(size=centre.shape)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (x[:, 0] > 0).astype(np.int64)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y), users


def data() -> tuple[torch.Tensor, torch.Tensor, np.ndarray, str]:
    rows = debian_users()
    if len({u for u, _ in rows}) >= 100:
        x, y = features([t for _, t in rows])
        return x, y, np.array([u for u, _ in rows]), "debian changelogs by maintainer"
    x, y, users = synthetic_users()
    return x, y, users, "synthetic grouped (no Debian changelogs found)"


def loss_fn(logits, y):
    return torch.nn.functional.cross_entropy(logits, y)


def one_seed(x, y, users, clip_unit: str, seed: int, config, canaries: int, records: int):
    """One run of the trainer (``clip_unit``) with canary users and its one-run audit."""
    from privacy_audit.audit.epsilon.canary_users import one_run_user_audit
    from privacy_audit.defenses.dp_sgd_with_canaries import CanaryUsers
    from privacy_audit.defenses.user_dp_sgd import train_user_dp

    torch.manual_seed(seed)
    model = torch.nn.Linear(BUCKETS, 2)
    dim = sum(p.numel() for p in model.parameters())
    cu = CanaryUsers(dim, canaries, records, config.clip, seed)
    run = train_user_dp(model, loss_fn, x, y, users, config, seed, cu, clip_unit)
    rec = cu.record(run.noise_multiplier, run.sample_rate)
    audit = one_run_user_audit(
        rec["scores"], rec["included"], run.claim, config.delta, records, seed=seed
    )
    with torch.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean())
    return run, audit, acc


def many_run_seed(
    x, y, users, clip_unit: str, seed: int, config, records: int, runs: int, n_users: int = 40
):
    """One many-runs user-level audit: ``runs`` trainings on a crafted dataset (the first
    ``n_users`` users of the data: DP holds for every dataset) without the canary user and
    ``runs`` with it (k = ``records`` records of gradient C·e_j at one coordinate fixed by
    ``seed``), independent seeds. Each run is scored by the canary user's likelihood ratio
    for a shift of c = k·C per draw (the per-record clipping the audit looks for; fixed
    before any run, so the bound is valid for either trainer)."""
    from privacy_audit.audit.epsilon.canary_users import many_run_user_audit
    from privacy_audit.defenses.dp_sgd_with_canaries import CanaryUsers
    from privacy_audit.defenses.user_dp_sgd import train_user_dp

    keep = np.isin(users, np.unique(users)[:n_users])
    xs, ys, us = x[keep], y[keep], users[keep]
    scores: dict[bool, list[float]] = {True: [], False: []}
    last = None
    for r in range(runs):
        for present in (True, False):
            run_seed = 1_000_003 * (seed + 1) + 2 * r + int(present)
            torch.manual_seed(seed)  # the same initial weights in every run of the audit
            model = torch.nn.Linear(BUCKETS, 2)
            dim = sum(p.numel() for p in model.parameters())
            cu = CanaryUsers(dim, 1, records, config.clip, seed, included=[present])
            last = train_user_dp(model, loss_fn, xs, ys, us, config, run_seed, cu, clip_unit)
            scores[present].append(
                float(cu.scores(last.noise_multiplier, last.sample_rate, records)[0])
            )
    audit = many_run_user_audit(scores[True], scores[False], last.claim, config.delta, seed=seed)
    return last, audit


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.defenses.user_dp_sgd import UserDPConfig, per_example_bug_epsilon

    seeds = int(settings.extra.get("seeds") or (3 if settings.quick else 100))
    canaries = int(settings.extra.get("canary_users") or (200 if settings.quick else 500))
    records = int(settings.extra.get("records") or 8)
    mr_seeds = int(settings.extra.get("many_run_seeds") or (1 if settings.quick else 10))
    mr_runs = int(settings.extra.get("many_runs") or (20 if settings.quick else 100))
    config = UserDPConfig(
        target_epsilon=1.0, delta=1e-5, clip=1.0, users_per_step=32.0, epochs=4.0, learning_rate=0.5
    )
    # many runs: 40 users, q ≈ 0.1 (a crafted small dataset; DP holds for every dataset)
    mr_config = dataclasses.replace(config, users_per_step=4.0)
    x, y, users, source = data()
    table, cases = [], {}
    trainers = (("user", "user-dp-sgd"), ("example", "per-example-clip (planted bug)"))
    for design in ("one-run", "many-runs"):
        for clip_unit, name in trainers:
            n = seeds if design == "one-run" else mr_seeds
            lbs, cpus, accs, verdicts, first = [], [], [], [], None
            for s in range(n):
                c0 = time.process_time()
                if design == "one-run":
                    r, audit, acc = one_seed(
                        x, y, users, clip_unit, settings.seed + s, config, canaries, records
                    )
                    accs.append(acc)
                else:
                    r, audit = many_run_seed(
                        x, y, users, clip_unit, settings.seed + s, mr_config, records, mr_runs
                    )
                cpus.append(time.process_time() - c0)
                first = first or (r, audit)
                lbs.append(audit["epsilon_lb"])
                verdicts.append(audit["status"])
            r, audit = first
            k = sum(v == "violated" for v in verdicts)
            lo, hi = clopper_pearson(k, n)
            true_eps = (
                r.claim.epsilon
                if clip_unit == "user"
                else per_example_bug_epsilon(
                    r.noise_multiplier, r.sample_rate, r.steps, config.delta, records
                )
            )
            row = {
                "audit": audit["name"],
                "trainer": name,
                "claim": {"epsilon": r.claim.epsilon, "delta": r.claim.delta, "unit": r.claim.unit},
                "true_user_epsilon_of_canary_users": true_eps,
                "true_epsilon_how": "the accountant at σ (claim)"
                if clip_unit == "user"
                else f"dp-accounting PLD at σ/k, k = {records} records per canary user",
                "violated": k,
                "seeds": n,
                "interval": [lo, hi],
                "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
                "epsilon_lb_median": float(np.median(lbs)),
                "epsilon_lb_max": float(np.max(lbs)),
                "ceiling": audit["ceiling"],
                "noise_multiplier": r.noise_multiplier,
                "sample_rate_users": r.sample_rate,
                "steps": r.steps,
                "cpu_s_median": float(np.median(cpus)),
            }
            if design == "one-run":
                row.update(canary_users=canaries, train_accuracy_median=float(np.median(accs)))
            else:
                row.update(runs_per_side=mr_runs, users=40)
            table.append(row)
            ms = [c * 1000 for c in cpus]
            cases[f"{design}: {name}"] = {
                "median_ms": float(np.median(ms)),
                "q1_ms": float(np.percentile(ms, 25)),
                "q3_ms": float(np.percentile(ms, 75)),
                "n": len(ms),
            }
            print(
                f"  {design:<9} {name:<32} VIOLATED {k}/{n} [{lo:.2f}, {hi:.2f}]  ε_LB median "
                f"{row['epsilon_lb_median']:.2f} (ceiling {row['ceiling']:.2f}, claim "
                f"{r.claim.epsilon:.3g}, true {true_eps:.3g})",
                flush=True,
            )
    return BenchResult(
        name="user-dp",
        reference="process CPU seconds per seed (one training run + its audit)",
        cases=cases,
        ratios={},
        setup={
            "data": source,
            "users": int(len(np.unique(users))),
            "rows": int(len(users)),
            "model": f"linear softmax, {BUCKETS} hashed-word features, 2 classes",
            "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
            "canary_users": canaries,
            "records_per_canary_user": records,
            "seeds": seeds,
            "many_run_seeds": mr_seeds,
            "many_runs_per_side": mr_runs,
            "many_run_config": {k: getattr(mr_config, k) for k in mr_config.__dataclass_fields__},
            "table": table,
        },
        targets={
            "soundness": "user-dp-sgd VIOLATED in <= 5% of seeds",
            "detection": "per-example-clip (claims per user) VIOLATED in most seeds",
        },
        notes=[
            "one-run bound (Steinke et al. 2023) over canary users, Bonferroni over the "
            "guess-count grid, 95% confidence; intervals: two-sided Clopper-Pearson 95%",
            "canary users: white-box, k records of gradient C·e_j each, drawn by the "
            "trainer's user sampler and clipped by its code (defenses/dp_sgd_with_canaries.py)",
            "many runs: R runs with and R without one canary user on a crafted 40-user "
            "dataset, threshold fixed on half, Clopper-Pearson on the other half",
        ],
    )


__all__ = ["run", "one_seed", "data", "debian_users", "features", "synthetic_users"]
