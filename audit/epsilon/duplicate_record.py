"""The duplicate-record audit: a crafted-dataset, many-runs, white-box ε audit of the
``dp-sgd`` classifier trainer (Opacus) that sees cross-example layers.

Why a crafted dataset. Per-example clipping bounds one example's OWN gradient by C. A
layer that mixes examples (batch statistics, ``batch-norm-classifier`` in
:mod:`privacy_audit.defenses.dp_bugs`) lets one example move every OTHER example's
per-sample gradient, which clipping does not bound. Canaries that bypass the forward pass
(recorded Dirac canaries) or read only their own loss (input canaries) cannot see this;
a dataset that is mostly copies of one record can. DP holds for every pair of neighbouring
datasets, so the auditor may choose this one:

- D = K identical copies of a record x_d (K = ``duplicates``);
- D' = D + one record x*, chosen far from x_d in the head's input space (the pooled
  representation at the fixed initial weights, :func:`farthest_record`), so that under
  batch statistics it moves the batch mean and variance, and with them all K duplicates'
  clipped gradients: the release moves by about 1.3·K·C, against at most C under correct
  per-example clipping (``tests/audit/epsilon/test_duplicate_record.py`` measures both with plain
  autograd per example).

The trainer. Every run is the REAL trainer, ``DPSGD.fit`` (the code path of
``classifier_train_once`` in the planted-bug benchmark): Opacus ``make_private``, its
Poisson sampler, its own calibration of σ for the target ε at this dataset size, batch
size and epochs; the claim is the ε the trainer prints for the run. The batch size is at
least K + 1 and there is one epoch, so Poisson sampling runs at q = 1 with one step: the
strongest setting for the test (no amplification, so σ is the smallest the claim allows,
and every duplicate is in the step). The initial weights are the same in every run of an
audit (the guarantee holds for any fixed initialisation); runs differ only in their seed,
which drives Opacus's noise, dropout and the sampler.

The model is the suite's ``tiny`` BERT with dropout OFF (``DuplicateRecordSetup.dropout``):
the auditor's choice of architecture, as the dataset is (DP-SGD's guarantee depends on
neither). With dropout 0.1 the randomly initialised BERT's pooled output barely depends
on the text (mean squared difference between records ≈ 1e-4 per feature, against a
dropout variance of 5e-3 among the copies), so one record hardly moves the batch
statistics: the measured noise-free shift is 3.5C (1.7σ) instead of 20C (10σ).

Threat model: white-box, the adversary sees the released noisy gradients (Σ clip(g_i) +
N(0, σ²C²) at each step), which is what DP-SGD's accounting protects. The score reads only
the first step's release, projected on a fixed direction u: a post-processing of the
white-box transcript, so any bound on it is a bound on the trainer.

Separation of roles, by construction:

1. **Pilot runs** (their own seed stream, :func:`run_seed` with ``pilot=True``) give the
   clipped sums before noise of the first step, c(D') and c(D), averaged over
   ``pilot_runs`` per side. Direction u = (c̄(D') − c̄(D)) / ‖·‖; threshold t = the
   midpoint of their projections on u (the Neyman–Pearson test of two Gaussians with
   these means and equal spread). Nothing of an evaluation run enters u or t.
2. **Evaluation runs** (R with x*, R without, a disjoint seed stream) return only their
   score ⟨release, u⟩; they never see the clipped sums.
3. Every evaluation run is counted at t: the Clopper–Pearson bound of
   :func:`privacy_audit.stats.epsilon_bounds.epsilon_lower_bound_from_counts` (Jagielski et
   al. 2020), valid for any (ε, δ)-DP mechanism because u and t are fixed before these
   independent runs. At perfect separation the bound is its ceiling,
   ln((1 − δ − p)/p) with p = 1 − (α/2)^(1/R): 2.57 at R = 50, 3.28 at R = 100.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

#: Seeds of one audit: pilot and evaluation runs come from disjoint streams.
_SEED_STRIDE = 10_000_019
PILOT_OFFSET = 5_000_000


@dataclass(frozen=True)
class DuplicateRecordSetup:
    """Sizes of the duplicate-record audit (recorded in the benchmark's output)."""

    duplicates: int = 16  # K copies of x_d
    runs_per_side: int = 100  # R evaluation runs with x*, R without
    pilot_runs: int = 2  # per side, for the direction and the threshold
    batch_size: int = 32  # >= K + 1: one Poisson batch holds every row (q = 1)
    epochs: int = 1  # one step
    max_length: int = 32
    target_epsilon: float = 2.0
    delta: float = 1e-5
    clip: float = 1.0
    learning_rate: float = 1e-3
    confidence: float = 0.95
    candidates: int = 64  # fixture rows searched for x*
    # the auditor's model: the tiny BERT with dropout off (see the module docstring)
    dropout: float = 0.0

    def validate(self) -> None:
        if self.duplicates < 2:
            raise ValueError(f"duplicates must be >= 2, got {self.duplicates}")
        if self.runs_per_side < 1 or self.pilot_runs < 1:
            raise ValueError("runs_per_side and pilot_runs must be >= 1")
        if self.runs_per_side >= PILOT_OFFSET // 2:
            raise ValueError(f"runs_per_side must be < {PILOT_OFFSET // 2}")
        if self.batch_size < self.duplicates + 1:
            raise ValueError("batch_size must hold every row of D' (>= duplicates + 1): q = 1")
        if self.epochs < 1:
            raise ValueError("epochs must be >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")


def run_seed(seed: int, run: int, present: bool, pilot: bool) -> int:
    """The trainer seed of one run of audit ``seed``. Pilot runs and evaluation runs use
    disjoint streams (a pilot seed is never an evaluation seed, any run below
    ``PILOT_OFFSET // 2``), and no two runs of an audit share a seed."""
    if not 0 <= run < PILOT_OFFSET // 2:
        raise ValueError(f"run index out of range: {run}")
    return _SEED_STRIDE * int(seed) + PILOT_OFFSET * int(bool(pilot)) + 2 * int(run) + int(present)


class FixedInitTarget:
    """A classifier target whose ``build`` returns the same initial weights whatever the
    run's seed (the seed still drives noise, dropout and sampling in ``DPSGD.fit``)."""

    def __init__(self, spec, label_names, init_seed: int, dropout: float | None = None) -> None:
        self.spec = spec
        self.label_names = tuple(label_names)
        self._model, self._tokenizer = spec.build(list(self.label_names), int(init_seed))
        if dropout is not None:  # the auditor's architecture choice: every dropout at p
            for m in self._model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = float(dropout)
                if hasattr(m, "dropout_prob"):  # transformers' SDPA attention reads this
                    m.dropout_prob = float(dropout)

    def build(self, seed: int):
        del seed  # fixed initialisation
        return copy.deepcopy(self._model), self._tokenizer


def _head_input(target: FixedInitTarget, texts: list[str], max_length: int) -> torch.Tensor:
    """The classifier head's input (BERT's pooled output) at the initial weights, no dropout."""
    from privacy_audit.targets.classifier import encode, forward_kwargs

    model, tok = target.build(0)
    model.eval()
    ids, mask = encode(tok, texts, max_length)
    with torch.no_grad():
        out = model.bert(**forward_kwargs(model, ids, mask))
    return out.pooler_output


def farthest_record(
    target: FixedInitTarget, record: str, candidates: list[str], max_length: int
) -> int:
    """Index of the candidate farthest from ``record`` in the head's input space."""
    h = _head_input(target, [record, *candidates], max_length)
    return int(torch.argmax((h[1:] - h[0]).norm(dim=1)))


def crafted_records(setup: DuplicateRecordSetup, seed: int):
    """(target, x_d, its label, x*, its label): x_d a fixture row, x* the fixture row of
    another label farthest from it in the head's input space at the fixed initial weights."""
    from privacy_audit import fixtures
    from privacy_audit.targets.loading import TargetSpec

    rows = fixtures.load_corpus("private")
    names = sorted({r["label"] for r in rows})
    spec = TargetSpec("tiny", max_length=setup.max_length)
    target = FixedInitTarget(spec, names, seed, setup.dropout)
    pick = np.random.default_rng([seed, 0xD0]).permutation(len(rows))
    x_d = rows[int(pick[0])]
    others = [rows[int(i)] for i in pick[1:] if rows[int(i)]["label"] != x_d["label"]]
    others = others[: setup.candidates]
    j = farthest_record(target, x_d["text"], [r["text"] for r in others], setup.max_length)
    x_s = others[j]
    return target, x_d["text"], names.index(x_d["label"]), x_s["text"], names.index(x_s["label"])


def dataset(setup: DuplicateRecordSetup, records, present: bool):
    """D (K copies of x_d) or D' = D + x*, as the trainer's ``Examples``."""
    from privacy_audit.defenses.base import Examples

    _, x_d, y_d, x_s, y_s = records
    k = setup.duplicates
    texts, labels = [x_d] * k, [y_d] * k
    if present:
        texts, labels = [*texts, x_s], [*labels, y_s]
    return Examples(
        ids=[f"dup-{i}" for i in range(k)] + (["crafted"] if present else []),
        texts=texts,
        labels=np.array(labels),
    )


def _train(present: bool, trainer_seed: int, setup, records) -> dict[str, Any]:
    """One run of ``DPSGD.fit`` on D or D'; the first step's released noisy sum and
    clipped sum (flat), and the run's claim."""
    from privacy_audit.defenses.dp_sgd import DPSGD, released_gradients
    from privacy_audit.targets.classifier import TrainingConfig

    first: dict[str, torch.Tensor] = {}

    def observe(step, params):
        if step == 0:
            first["released"] = torch.cat([p.grad.detach().reshape(-1) for p in params])
            first["clipped"] = torch.cat([p.summed_grad.detach().reshape(-1) for p in params])

    training = TrainingConfig(
        epochs=setup.epochs,
        batch_size=setup.batch_size,
        learning_rate=setup.learning_rate,
        max_length=setup.max_length,
        progress=False,
    )
    defense = DPSGD(epsilon=setup.target_epsilon, delta=setup.delta, max_grad_norm=setup.clip)
    with released_gradients(observe):
        release, report = defense.fit(
            records[0], dataset(setup, records, present), training, trainer_seed
        )
    if "released" not in first:
        raise RuntimeError("the trainer released no step (empty Poisson batches only)")
    return {
        **first,
        "claimed": float(release.claim.epsilon),
        "sigma": float(report.info["noise_multiplier"]),
        "q": float(report.info["sample_rate"]),
        "steps": int(release.schedule.steps),
    }


def pilot(seed: int, setup: DuplicateRecordSetup, records) -> dict[str, Any]:
    """Direction u and threshold t from the PILOT runs only (clipped sums before noise,
    averaged over ``pilot_runs`` per side): u = (c̄(D') − c̄(D))/‖·‖, t = the midpoint of
    ⟨c̄(D'), u⟩ and ⟨c̄(D), u⟩. Also the noise-free shift ‖c̄(D') − c̄(D)‖ in units of C."""
    sums = {}
    for present in (True, False):
        runs = [
            _train(present, run_seed(seed, r, present, pilot=True), setup, records)
            for r in range(setup.pilot_runs)
        ]
        sums[present] = torch.stack([x["clipped"] for x in runs]).double().mean(0)
    diff = sums[True] - sums[False]
    shift = float(diff.norm())
    if not shift > 0:
        raise RuntimeError("the pilot runs' clipped sums do not differ: no direction")
    u = diff / shift
    t = 0.5 * float(sums[True] @ u + sums[False] @ u)
    return {"direction": u, "threshold": t, "shift_c": shift / setup.clip}


def evaluation_scores(
    seed: int, setup: DuplicateRecordSetup, records, direction: torch.Tensor
) -> dict[str, Any]:
    """R runs with x* and R without (the evaluation seed stream); each returns only its
    score ⟨first released noisy sum, u⟩ (u fixed beforehand by :func:`pilot`) and its claim."""
    scores = {True: [], False: []}
    claims, info = [], {}
    u = direction.double()
    for r in range(setup.runs_per_side):
        for present in (True, False):
            run = _train(present, run_seed(seed, r, present, pilot=False), setup, records)
            scores[present].append(float(run["released"].double() @ u))
            claims.append(run["claimed"])
            info = {k: run[k] for k in ("sigma", "q", "steps")}
    return {
        "scores_in": np.array(scores[True]),
        "scores_out": np.array(scores[False]),
        "claimed": max(claims),  # the largest ε any run printed: never overstate a violation
        **info,
    }


def bound(
    scores_in, scores_out, threshold: float, delta: float, confidence: float = 0.95
) -> dict[str, Any]:
    """Clopper–Pearson lower bound on ε at a threshold fixed before these runs: runs with
    x* (positives) scoring below t are false negatives, runs without scoring at or above
    t false positives."""
    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound_from_counts

    s_in, s_out = np.asarray(scores_in, float), np.asarray(scores_out, float)
    fp, fn = int((s_out >= threshold).sum()), int((s_in < threshold).sum())
    eps = epsilon_lower_bound_from_counts(fp, len(s_out), fn, len(s_in), delta, confidence)
    return {
        "eps": float(eps),
        "fp": fp,
        "fn": fn,
        # a perfect separation's bound at these counts (every run counted, no split)
        "ceiling": float(
            epsilon_lower_bound_from_counts(0, len(s_out), 0, len(s_in), delta, confidence)
        ),
    }


def duplicate_record_audit(seed: int, setup: DuplicateRecordSetup | None = None) -> dict[str, Any]:
    """The whole audit of the ``dp-sgd`` classifier trainer for one seed: crafted
    records, pilot runs, then evaluation runs, then the bound. The planted-bug benchmark
    runs it with a planted bug switched on around the call. ``cpu_s``: process time of all its runs."""
    setup = setup or DuplicateRecordSetup()
    setup.validate()
    t0 = time.process_time()
    records = crafted_records(setup, seed)
    p = pilot(seed, setup, records)
    ev = evaluation_scores(seed, setup, records, p["direction"])
    b = bound(ev["scores_in"], ev["scores_out"], p["threshold"], setup.delta, setup.confidence)
    sigma = ev["sigma"]
    return {
        **b,
        "claimed": ev["claimed"],
        "violated": bool(b["eps"] > ev["claimed"]),
        "sigma": sigma,
        "q": ev["q"],
        "steps": ev["steps"],
        "shift_c": p["shift_c"],
        "shift_sigma": p["shift_c"] / sigma,
        "threshold": p["threshold"],
        "runs_per_side": setup.runs_per_side,
        "pilot_runs_per_side": setup.pilot_runs,
        "trained_runs": 2 * (setup.runs_per_side + setup.pilot_runs),
        "cpu_s": time.process_time() - t0,
        "scores_in": [round(float(x), 4) for x in ev["scores_in"]],
        "scores_out": [round(float(x), 4) for x in ev["scores_out"]],
    }
