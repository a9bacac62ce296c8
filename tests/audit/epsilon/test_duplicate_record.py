"""The duplicate-record audit (audit/epsilon/duplicate_record.py) of the dp-sgd classifier
trainer: the crafted dataset's release shift against an independent computation (plain
autograd per example, batch statistics written out here), the audit flags the planted
batch-norm bug and not the correct trainer, and pilot and evaluation runs are kept apart
by construction (a fake trainer shows the order, the seeds and the null's false-violation
rate at the claim's own mechanism)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from privacy_audit.audit.epsilon import duplicate_record as dr
from privacy_audit.defenses import dp_bugs

BUG = "batch-norm-classifier"


@pytest.fixture(scope="module")
def records():
    setup = dr.DuplicateRecordSetup(duplicates=16, pilot_runs=1)
    return setup, dr.crafted_records(setup, 0)


def _independent_clipped_sum(records, k: int, present: bool, bug: bool, clip: float):
    """Σ_i clip_C(g̃_i) at the initial weights, by plain autograd: every example gets its
    OWN copy of the parameters (torch.func.functional_call), so ∂L/∂θ_i is example i's
    per-sample gradient, L = Σ_i CE_i (what Opacus clips for a mean loss, times the
    batch size); with ``bug`` the head's input is standardised with the batch's mean and
    (biased) variance, written out here. Flat over the trainable parameters."""
    from torch.func import functional_call

    from privacy_audit.targets.classifier import encode

    target, x_d, y_d, x_s, y_s = records
    model, tok = target.build(0)
    model.train()
    texts, labels = [x_d] * k + ([x_s] if present else []), [y_d] * k + ([y_s] if present else [])
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    base = dict(model.named_parameters())
    copies = [{n: base[n].detach().clone().requires_grad_(True) for n in names} for _ in texts]
    pooled = []
    for text, c in zip(texts, copies, strict=True):
        ids, mask = encode(tok, [text], 32)
        n_tok = int(mask.sum())
        enc = {n[len("bert.") :]: v for n, v in c.items() if n.startswith("bert.")}
        out = functional_call(
            model.bert,
            enc,
            args=(),
            kwargs={"input_ids": ids[:, :n_tok], "attention_mask": mask[:, :n_tok]},
        )
        pooled.append(out.pooler_output)
    h = torch.cat(pooled)
    if bug:
        h = (h - h.mean(0)) / torch.sqrt(h.var(0, unbiased=False) + 1e-5)
    loss = 0.0
    for i, c in enumerate(copies):
        logits = h[i : i + 1] @ c["classifier.weight"].T + c["classifier.bias"]
        loss = loss + torch.nn.functional.cross_entropy(logits, torch.tensor([labels[i]]))
    flat_grads = []
    for c in copies:
        g = torch.autograd.grad(loss, [c[n] for n in names], retain_graph=True)
        flat_grads.append(torch.cat([x.reshape(-1) for x in g]).double())
    total = torch.zeros_like(flat_grads[0])
    for g in flat_grads:
        total += g * min(1.0, clip / float(g.norm()))
    return total


def test_duplicate_dataset_moves_the_release_by_many_c_under_the_bug_and_at_most_c_without(
    records,
):
    """Known answer. The trainer's own clipped sums (DPSGD.fit, Opacus, read by the
    audit's pilot) against plain autograd per example: the noise-free shift
    ‖c(D') − c(D)‖ is ≤ C for the correct trainer and ≥ 5C (about 1.3·K·C) with the
    batch-statistics layer, K = 16 copies."""
    setup, rec = records
    shifts = {}
    for bug in (None, BUG):
        with dp_bugs.planted(bug):
            trainer = dr.pilot(7, setup, rec)["shift_c"]
        want = float(
            (
                _independent_clipped_sum(rec, 16, True, bug is not None, setup.clip)
                - _independent_clipped_sum(rec, 16, False, bug is not None, setup.clip)
            ).norm()
        )
        assert trainer == pytest.approx(want, rel=2e-3, abs=1e-4)
        shifts[bug] = trainer
    assert shifts[None] <= 1.0 + 1e-4
    assert shifts[BUG] >= 5.0
    assert shifts[BUG] >= 0.8 * 16  # about 1.3·K·C: one record moves every copy


def test_audit_flags_the_batch_norm_bug_and_not_the_correct_trainer(records):
    """The real trainer, 20 runs per side, claim ε = 1 (σ larger; the ceiling at 20 runs,
    1.60, above it): the bug's runs separate perfectly and the claim is VIOLATED; the
    correct trainer's are not."""
    setup = dr.DuplicateRecordSetup(target_epsilon=1.0, runs_per_side=20, pilot_runs=1)
    out = {}
    for bug in (None, BUG):
        with dp_bugs.planted(bug):
            out[bug] = dr.duplicate_record_audit(0, setup)
    bad, good = out[BUG], out[None]
    assert bad["claimed"] == pytest.approx(1.0, abs=0.02) and bad["q"] == 1.0
    assert bad["steps"] == 1 and bad["trained_runs"] == 42
    assert bad["fp"] == 0 and bad["fn"] == 0 and bad["shift_sigma"] > 4
    assert bad["violated"] and bad["eps"] > bad["claimed"]
    assert bad["eps"] == pytest.approx(bad["ceiling"])  # perfect separation: the ceiling
    assert not good["violated"] and good["eps"] < 1.0
    assert good["shift_c"] <= 1.0 + 1e-4


class _FakeTrainer:
    """Stands in for ``_train``: a Gaussian mechanism in 3 dimensions whose clipped sums
    are c(D) = 0 and c(D') = shift·e_0; records the order of the seeds it is called with."""

    def __init__(self, shift: float, sigma: float, seed: int = 0):
        self.shift, self.sigma = shift, sigma
        self.calls: list[int] = []
        self.rng = np.random.default_rng(seed)

    def __call__(self, present, trainer_seed, setup, records):
        self.calls.append(trainer_seed)
        c = torch.zeros(3, dtype=torch.float64)
        c[0] = self.shift if present else 0.0
        noise = torch.as_tensor(self.rng.normal(0, self.sigma, 3))
        return {
            "released": c + noise,
            "clipped": c,
            "claimed": 2.0,
            "sigma": self.sigma,
            "q": 1.0,
            "steps": 1,
        }


def test_pilot_runs_come_first_from_a_disjoint_seed_stream_and_fix_the_threshold(monkeypatch):
    """By construction: every pilot run precedes every evaluation run, no seed is shared,
    the threshold is the midpoint of the pilots' clipped projections, and evaluation runs
    hand back nothing but scores."""
    fake = _FakeTrainer(shift=4.0, sigma=1.0)
    monkeypatch.setattr(dr, "_train", fake)
    monkeypatch.setattr(dr, "crafted_records", lambda setup, seed: None)
    setup = dr.DuplicateRecordSetup(runs_per_side=30, pilot_runs=2)
    res = dr.duplicate_record_audit(3, setup)
    pilots = {dr.run_seed(3, r, p, pilot=True) for r in range(2) for p in (True, False)}
    evals = {dr.run_seed(3, r, p, pilot=False) for r in range(30) for p in (True, False)}
    assert not pilots & evals and len(pilots) == 4 and len(evals) == 60
    assert set(fake.calls[:4]) == pilots and set(fake.calls[4:]) == evals
    assert len(fake.calls) == len(set(fake.calls)) == res["trained_runs"]
    assert res["threshold"] == pytest.approx(2.0)  # (4 + 0) / 2, from the pilots alone
    ev = dr.evaluation_scores(3, setup, None, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    assert set(ev) == {"scores_in", "scores_out", "claimed", "sigma", "q", "steps"}
    # no two audits share a run
    other = {
        dr.run_seed(4, r, p, pilot=b)
        for r in range(30)
        for p in (True, False)
        for b in (True, False)
    }
    assert not other & (pilots | evals)


def test_a_mechanism_at_exactly_the_claim_is_flagged_in_at_most_5_percent(monkeypatch):
    """The null at its worst: a Gaussian mechanism of sensitivity C at the σ for which
    ε(σ) = 2 (δ = 10⁻⁵, no subsampling), audited against the claim 2 with the whole
    pipeline (pilot direction and threshold, evaluation counts, Clopper–Pearson), 200
    audits of 100 runs per side: at most 5% violations (it is ~0 by the bound's slack)."""
    from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon

    lo, hi = 0.1, 10.0
    for _ in range(60):  # σ with ε_Gaussian(1/σ) = 2
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gaussian_mechanism_epsilon(1 / mid, 1e-5) > 2.0 else (lo, mid)
    fake = _FakeTrainer(shift=1.0, sigma=hi, seed=1)
    monkeypatch.setattr(dr, "_train", fake)
    monkeypatch.setattr(dr, "crafted_records", lambda setup, seed: None)
    setup = dr.DuplicateRecordSetup(runs_per_side=100, pilot_runs=1)
    hits = sum(dr.duplicate_record_audit(s, setup)["violated"] for s in range(200))
    assert hits <= 10
    # and the same pipeline sees a 10σ shift (the bug's) at the same size
    fake.shift = 10 * hi
    assert dr.duplicate_record_audit(0, setup)["eps"] > 3.0


def test_duplicate_record_cli_end_to_end_and_bad_input(tmp_path, capsys):
    """``--duplicate-record RUNS`` writes its cell as JSON; bad sizes exit 2 before any
    training, with no file written."""
    from experiments.dp_bugs import main

    out = tmp_path / "dr.json"
    bad = tmp_path / "bad.json"
    assert main(["--duplicate-record", "3", "--duplicates", "1", "--out", str(bad)]) == 2
    assert "duplicates must be >= 2" in capsys.readouterr().err and not bad.exists()
    assert (
        main(["--duplicate-record", "3", "--bugs", "clip-after-aggregation", "--out", str(bad)])
        == 2
    )
    assert not bad.exists()
    assert main(["--duplicate-record", "2", "--seeds", "1", "--bugs", BUG, "--out", str(out)]) == 0
    cell = json.loads(out.read_text())["cells"][f"{BUG} (classifier)"]
    audit = next(iter(cell["audits"].values()))
    assert cell["q"] == 1.0 and cell["steps"] == 1 and math.isinf(cell["true_epsilon"])
    assert audit["runs_per_side"] == 2 and audit["seeds"] == 1
    assert audit["median_shift_sigma"] > 4  # the bug's shift, measured by the pilot


def test_the_violated_diagnosis_points_cross_example_layers_to_this_audit():
    from privacy_audit.audit.epsilon.claimed_vs_audited import diagnose

    d = diagnose([{"name": "one-run white-box", "status": "ok", "exceeds_claim": True}], None)
    assert "duplicate-record" in d["not_seen_by_these_audits"]
    assert "cross-example" in d["not_seen_by_these_audits"]


def test_the_batch_must_hold_every_row_of_the_larger_dataset():
    # D' has K copies and x*: a batch of K rows would sample (q < 1), breaking q = 1
    with pytest.raises(ValueError, match="batch_size must hold every row"):
        dr.DuplicateRecordSetup(duplicates=16, batch_size=16).validate()
    dr.DuplicateRecordSetup(duplicates=16, batch_size=17).validate()


def test_evaluation_reports_the_largest_claim_and_the_projected_scores(monkeypatch):
    claims = iter([2.0, 2.5, 1.5, 2.25])  # the ε each run printed

    def fake(present, trainer_seed, setup, records):
        released = torch.tensor([3.0 if present else 1.0, 5.0], dtype=torch.float64)
        return {"released": released, "claimed": next(claims), "sigma": 1.0, "q": 1.0, "steps": 1}

    monkeypatch.setattr(dr, "_train", fake)
    setup = dr.DuplicateRecordSetup(runs_per_side=2, pilot_runs=1)
    u = torch.tensor([0.6, 0.8], dtype=torch.float64)
    ev = dr.evaluation_scores(0, setup, None, u)
    assert ev["claimed"] == 2.5  # the largest: a violation is never overstated
    np.testing.assert_allclose(ev["scores_in"], [0.6 * 3 + 0.8 * 5] * 2)
    np.testing.assert_allclose(ev["scores_out"], [0.6 * 1 + 0.8 * 5] * 2)


def test_bound_counts_a_score_at_the_threshold_as_a_positive():
    # with x*: 1 below t (a false negative), 2 at or above; without: 1 at t (a false positive)
    b = dr.bound([1.0, 2.0, 3.0], [0.0, 2.0], threshold=2.0, delta=1e-5)
    assert (b["fp"], b["fn"]) == (1, 1)


def test_run_indices_stop_where_the_pilot_stream_begins():
    from privacy_audit.audit.epsilon.duplicate_record import PILOT_OFFSET, run_seed

    last = PILOT_OFFSET // 2 - 1
    # evaluation seeds 2 run + present stay below the pilot offset: 2 * last + 1 < offset
    assert run_seed(0, last, True, pilot=False) == PILOT_OFFSET - 1
    # one run more would collide with pilot run 0 (2 * offset/2 = offset): refused
    with pytest.raises(ValueError, match="out of range"):
        run_seed(0, last + 1, False, pilot=False)


def test_a_bound_equal_to_the_claim_is_not_a_violation(monkeypatch):
    monkeypatch.setattr(dr, "crafted_records", lambda setup, seed: None)
    monkeypatch.setattr(
        dr,
        "pilot",
        lambda seed, setup, records: {"direction": None, "threshold": 0.0, "shift_c": 2.0},
    )
    ev = {"scores_in": np.ones(3), "scores_out": np.zeros(3), "claimed": 2.0}
    ev.update(sigma=1.0, q=1.0, steps=1)
    monkeypatch.setattr(dr, "evaluation_scores", lambda *a: ev)
    setup = dr.DuplicateRecordSetup(runs_per_side=3, pilot_runs=1)
    for eps, violated in ((2.0, False), (2.0001, True)):
        monkeypatch.setattr(
            dr, "bound", lambda *a, e=eps: {"eps": e, "fp": 0, "fn": 0, "ceiling": 3.0}
        )
        assert dr.duplicate_record_audit(0, setup)["violated"] is violated


def test_the_crafted_record_is_the_farthest_candidate(monkeypatch):
    # head inputs: x_d at the origin, candidates at distances 1, 3, 2
    h = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0], [2.0, 0.0]])
    monkeypatch.setattr(dr, "_head_input", lambda target, texts, max_length: h)
    assert dr.farthest_record(None, "x_d", ["a", "b", "c"], 8) == 1


def test_bound_passes_false_positives_with_the_runs_without_x_star():
    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound_from_counts

    # 50 runs with x*, all above t; 100 without, 5 at or above t (unequal sides, so the
    # order of (fp, runs without) and (fn, runs with) matters)
    s_in = np.full(50, 2.0)
    s_out = np.r_[np.full(5, 2.0), np.zeros(95)]
    b = dr.bound(s_in, s_out, threshold=1.0, delta=1e-5)
    assert (b["fp"], b["fn"]) == (5, 0)
    assert b["eps"] == pytest.approx(epsilon_lower_bound_from_counts(5, 100, 0, 50, 1e-5, 0.95))
    assert b["eps"] != pytest.approx(epsilon_lower_bound_from_counts(0, 100, 5, 50, 1e-5, 0.95))
