"""Planted DP-SGD bugs (defenses/dp_bugs.py): each changes the released mechanism as
documented (known answers computed here with plain autograd, numpy and dp-accounting,
not with the engine), the correct trainer is the default, and no config reaches a flag."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from privacy_audit.defenses import DEFENSES, dp_bugs
from privacy_audit.defenses.dp_engine import (
    DPSGDEngine,
    account,
    accountant_inputs,
    train_private_ids,
)
from privacy_audit.defenses.dp_sgd_with_canaries import SampledGradientCanaries
from privacy_audit.defenses.phantom import per_sample_token_loss

ROOT = Path(__file__).resolve().parents[2]
C = 1.0


def _lm(seed=0):
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=40,
        n_positions=16,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    cfg._attn_implementation = "eager"
    return GPT2LMHeadModel(cfg).eval()


def _ids(b=6, seed=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 40, (b, 8), generator=g)


def _per_example_grads(model, ids):
    """Independent: one autograd backward per example (no vmap, no engine)."""
    params = [p for p in model.parameters() if p.requires_grad]
    out = []
    for i in range(len(ids)):
        x = ids[i : i + 1]
        loss = per_sample_token_loss(model(input_ids=x).logits, x, torch.ones_like(x))[0]
        out.append([g.detach() for g in torch.autograd.grad(loss, params)])
    return params, out


def _release(bug, model, ids, sigma=0.0, expected=6.0, seed=0):
    engine = DPSGDEngine(model, C, sigma, expected, norms="explicit")
    gen = torch.Generator().manual_seed(seed)
    with dp_bugs.planted(bug):
        out = engine.private_gradients(ids, torch.ones_like(ids) if ids is not None else None, gen)
    return engine, {p: g * expected for p, g in out.items()}  # the sum, before the division


def _noise_sd(bug, sigma=2.0, expected=8.0):
    """Released sum of an EMPTY batch (noise only), per parameter group."""
    model = _lm()
    _, out = _release(bug, model, None, sigma, expected)
    big = torch.cat([g.flatten() for p, g in out.items() if p.ndim >= 2]).numpy()
    small = torch.cat([g.flatten() for p, g in out.items() if p.ndim < 2]).numpy()
    return big.std(), small.std()


def test_correct_trainer_noise_is_sigma_c_in_every_group():
    big, small = _noise_sd(None)
    assert big == pytest.approx(2.0 * C, rel=0.05)
    assert small == pytest.approx(2.0 * C, rel=0.2)  # 224 coordinates


def test_noise_divided_by_batch_releases_sigma_c_over_b():
    big, _ = _noise_sd("noise-divided-by-batch", sigma=2.0, expected=8.0)
    assert big == pytest.approx(2.0 * C / 8.0, rel=0.05)


def test_accumulation_noise_once_releases_sigma_c_over_sqrt_k():
    big, _ = _noise_sd("accumulation-noise-once", sigma=2.0)
    assert big == pytest.approx(2.0 * C / math.sqrt(dp_bugs.ACCUMULATION), rel=0.05)


def test_unnoised_group_releases_no_noise_there_only():
    big, small = _noise_sd("unnoised-no-decay-group")
    assert small == 0.0
    assert big == pytest.approx(2.0 * C, rel=0.05)


def _clip(vecs):
    """Independent per-example clipping: w_i = min(1, C/(‖g_i‖+1e-6)) over ``vecs``."""
    return [min(1.0, C / (float(sum((v**2).sum() for v in g)) ** 0.5 + 1e-6)) for g in vecs]


def test_correct_trainer_releases_the_sum_of_per_example_clipped_gradients():
    model = _lm()
    ids = _ids()
    params, per = _per_example_grads(model, ids)
    _, out = _release(None, model, ids)
    w = _clip(per)
    for k, p in enumerate(params):
        want = sum(w[i] * per[i][k] for i in range(len(ids)))
        torch.testing.assert_close(out[p], want, atol=1e-5, rtol=1e-4)


def test_unclipped_group_is_summed_raw_and_weights_use_the_other_group_only():
    model = _lm()
    ids = _ids()
    params, per = _per_example_grads(model, ids)
    _, out = _release("unclipped-no-decay-group", model, ids)
    big = [k for k, p in enumerate(params) if p.ndim >= 2]
    w = _clip([[g[k] for k in big] for g in per])
    assert min(w) < 1  # clipping is active on this batch
    for k, p in enumerate(params):
        if p.ndim < 2:
            want = sum(per[i][k] for i in range(len(ids)))
        else:
            want = sum(w[i] * per[i][k] for i in range(len(ids)))
        torch.testing.assert_close(out[p], want, atol=1e-5, rtol=1e-4)


def test_clip_after_aggregation_clips_the_batch_sum():
    model = _lm()
    ids = _ids()
    params, per = _per_example_grads(model, ids)
    _, out = _release("clip-after-aggregation", model, ids)
    total = [sum(per[i][k] for i in range(len(ids))) for k in range(len(params))]
    norm = float(torch.sqrt(sum((t**2).sum() for t in total)))
    factor = min(1.0, C / (norm + 1e-6))
    assert norm > C  # the batch sum is clipped here
    for k, p in enumerate(params):
        torch.testing.assert_close(out[p], factor * total[k], atol=1e-5, rtol=1e-4)
    assert float(torch.sqrt(sum((g**2).sum() for g in out.values()))) == pytest.approx(C, rel=1e-4)


class _Recorder:
    """Stands in for the engine: records which rows each step received."""

    max_grad_norm = 1.0
    last_norms = None
    sampled_canaries = None

    def __init__(self):
        self.params = [torch.nn.Parameter(torch.zeros(1))]
        self.batches = []

    def step(self, optimizer, ids, mask, generator):
        self.batches.append([] if ids is None else ids[:, 0].tolist())


def _sampled_rows(bug, n=60, q=0.1, epochs=3):
    ids = torch.arange(n)[:, None].repeat(1, 2)  # row r holds token r: rows are identifiable
    rec = _Recorder()
    steps = int(round(epochs / q))
    with dp_bugs.planted(bug):
        train_private_ids(rec, ids, torch.ones_like(ids), steps, q, 0.1, seed=1)
    return rec.batches, n, steps


def test_shuffle_bug_partitions_every_epoch_and_the_correct_sampler_is_poisson():
    batches, n, steps = _sampled_rows("shuffle-as-poisson")
    per_epoch = int(round(1 / 0.1))
    for e in range(steps // per_epoch):
        rows = sum(batches[e * per_epoch : (e + 1) * per_epoch], [])
        assert sorted(rows) == list(range(n))  # each example exactly once per epoch
    assert {len(b) for b in batches} == {6}
    batches, n, steps = _sampled_rows(None)
    sizes = np.array([len(b) for b in batches])
    counts = np.bincount(sum(batches, []), minlength=n)
    # Poisson(q): batch sizes vary, appearances per example ~ Binomial(T, q)
    assert sizes.std() > 1.0
    assert counts.var() == pytest.approx(steps * 0.1 * 0.9, rel=0.5)


def _pld_epsilon(sigma, q, steps, delta):
    import dp_accounting

    ev = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(ev)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize(
    "bug,factor",
    [
        ("accountant-wrong-n", (1 / dp_bugs.WRONG_N_FACTOR, 1)),
        ("accountant-steps-per-epoch", (1, 1 / 4)),
    ],
)
def test_accounting_bugs_understate_epsilon(bug, factor):
    q, steps, epochs, sigma, delta = 0.05, 80, 4, 1.0, 1e-5
    assert accountant_inputs(q, steps, epochs) == (q, steps)  # the correct trainer
    with dp_bugs.planted(bug):
        q_acc, t_acc = accountant_inputs(q, steps, epochs)
    assert q_acc == pytest.approx(q * factor[0]) and t_acc == round(steps * factor[1])
    claimed = account(sigma, q_acc, t_acc, delta)["claimed"]
    true = _pld_epsilon(sigma, q, steps, delta)  # independent: dp-accounting on the run
    assert true > 1.5 * claimed


def test_record_canaries_go_through_the_engines_clipping():
    """σ = 0, no data: a sampled record canary releases exactly C at its coordinate when
    clipped, and magnitude·C when its group is left unclipped (the planted bug)."""
    for bug, small_value in ((None, C), ("unclipped-no-decay-group", 10 * C)):
        model = _lm()
        engine = DPSGDEngine(model, C, 0.0, 1.0, norms="explicit")
        can = SampledGradientCanaries(engine.params, 40, C, seed=2, magnitude=10.0)
        engine.sampled_canaries = can
        can.set_batch(torch.ones(can.present_count, dtype=torch.bool))
        with dp_bugs.planted(bug):
            engine.private_gradients(None)
        o = can.observations[0]
        inc = can.included.numpy()
        assert np.all(o[~inc] == 0)
        small = can.in_small_group & inc
        assert small.any() and (~can.in_small_group & inc).any()
        np.testing.assert_allclose(o[small], small_value, rtol=1e-5)
        clipped = 10 * C / (10 * C + 1e-6) if bug is None else 1.0
        np.testing.assert_allclose(o[~can.in_small_group & inc], C * min(1.0, clipped), rtol=1e-5)


def test_planted_bugs_are_switched_on_only_inside_the_context():
    assert dp_bugs.active() is None
    with dp_bugs.planted("shuffle-as-poisson"):
        assert dp_bugs.active() == "shuffle-as-poisson"
        with pytest.raises(RuntimeError), dp_bugs.planted("accountant-wrong-n"):
            pass
    assert dp_bugs.active() is None
    with pytest.raises(ValueError):
        with dp_bugs.planted("no-such-bug"):
            pass
    assert len(dp_bugs.BUGS) >= 6


def test_no_config_or_cli_reaches_a_planted_bug():
    """The switch is a context manager; no defense parameter, config file, CLI module or
    environment read refers to it, and an unknown defense parameter is rejected."""
    for cls in DEFENSES.values():
        assert not any("bug" in k or "planted" in k for k in cls.PARAMS)
    callers = []
    for path in (ROOT).rglob("*.py"):
        if ".venv" in path.parts or path.relative_to(ROOT).parts[0] == "tests":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bplanted\(", text):
            callers.append(path.relative_to(ROOT).as_posix())
    assert sorted(callers) == ["defenses/dp_bugs.py", "experiments/dp_bugs.py"]
    # the trainers only READ the switch (both the causal-LM engine and, for the
    # cross-example bug, the Opacus classifier trainer); nothing else imports it
    readers = {}
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or path.relative_to(ROOT).parts[0] == "tests":
            continue
        # attribute reads, not file names (tools name "tests/defenses/test_dp_bugs.py")
        uses = set(re.findall(r"dp_bugs\.(?!py\b)(\w+)", path.read_text(encoding="utf-8")))
        if uses:
            readers[path.relative_to(ROOT).as_posix()] = uses
    assert set(readers) == {
        "experiments/dp_bugs.py",
        "defenses/dp_bugs.py",  # its own docstring
        "defenses/dp_engine.py",
        "defenses/dp_sgd.py",
    }
    assert readers["defenses/dp_sgd.py"] == {"is_active", "insert_batch_norm"}
    assert readers["defenses/dp_engine.py"] <= {
        "active",
        "is_active",
        "ACCUMULATION",
        "WRONG_N_FACTOR",
    }
    src = (ROOT / "defenses" / "dp_bugs.py").read_text(encoding="utf-8")
    assert "os.environ" not in src and "getenv" not in src and "import os" not in src
    for bug in ("shuffle-as-poisson", "batch-norm-classifier"):
        with pytest.raises(ValueError, match="unknown parameter"):
            DEFENSES["dp-sgd"](planted_bug=bug)


def _audit(name, exceeds, **kw):
    return {"name": name, "status": "ok", "exceeds_claim": exceeds, "epsilon_lb": 3.0, **kw}


def test_diagnosis_names_the_audit_threat_model_and_bug_classes():
    from privacy_audit.audit.epsilon.claimed_vs_audited import DP_BUGS_TABLE, diagnose

    white_only = diagnose(
        [
            _audit("gradient-canary", False),
            _audit("one-run white-box (thresholded)", True),
            _audit("input-canaries (one-run)", False),
        ],
        None,
    )
    assert [c["audit"] for c in white_only["caught_by"]] == ["one-run white-box (thresholded)"]
    assert "white-box" in white_only["caught_by"][0]["threat_model"]
    assert len(white_only["bug_classes"]) == 1 and "noise" in white_only["bug_classes"][0]
    assert white_only["table"] == DP_BUGS_TABLE and (ROOT / DP_BUGS_TABLE).exists()
    declared = diagnose([_audit("gradient-canary", True)], None)
    assert declared["bug_classes"][0].startswith("accounting")
    black = diagnose(
        [
            _audit("input-canaries (one-run)", True),
            _audit("one-run Gaussian", True, asymptotic=True),
        ],
        {"attack": "loss", "violated": True},
    )
    assert [c["audit"] for c in black["caught_by"]] == [
        "input-canaries (one-run)",
        "trade-off test (loss)",
    ]  # the asymptotic bound is never evidence
    assert any(b.startswith("gross") for b in black["bug_classes"])


def test_violated_report_shows_where_to_look_escaped():
    from privacy_audit.audit.epsilon.claimed_vs_audited import diagnose
    from privacy_audit.reports import render_html

    xss = "<script>alert(1)</script>"
    audits = [_audit(f"one-run white-box {xss}", True, threat_model="white-box")]
    ea = {
        "claimed_epsilon": 1.0,
        "claimed_delta": 1e-5,
        "comparable": True,
        "status": "violated",
        "evidence": ["one-run white-box: ε ≥ 3 exceeds the claimed ε = 1"],
        "audits": [{**audits[0], "ceiling": 5.0, "confidence": 0.95, "delta": 1e-5}],
        "tradeoff": None,
        "diagnosis": diagnose(audits, None),
    }
    claim = {"epsilon": 1.0, "delta": 1e-5, "unit": "example", "notion": "central-dp"}
    run = {"name": "buggy", "defense": "dp-sgd", "claim": {**claim, "proven": True, "note": ""}}
    run.update(attacks=[], strongest_attack=None, epsilon_audit=ea)
    html = render_html({"schema_version": 1, "title": "t", "seed": 0, "config": {}, "runs": [run]})
    assert "Where to look" in html and "docs/dp-bugs.md" in html
    assert xss not in html and "&lt;script&gt;" in html


def test_realised_schedule_counts_rows_and_never_overstates_q_of_a_correct_run():
    from experiments.dp_bugs import realised_schedule

    ids = torch.arange(60)[:, None].repeat(1, 2)
    rec = _Recorder()
    info = train_private_ids(rec, ids, torch.ones_like(ids), 30, 0.1, 0.1, seed=4)
    assert info["rows_sampled"] == sum(len(b) for b in rec.batches) and info["rows"] == 60
    # coverage of the one-sided 97.5% lower bound on q, by simulation (numpy binomial)
    rng = np.random.default_rng(0)
    q, rows, steps = 0.05, 600, 40
    draws = rng.binomial(rows * steps, q, size=2000)
    covered = np.mean([realised_schedule(int(k), rows, steps).sample_rate <= q for k in draws])
    assert covered >= 0.965  # nominal 0.975; 2000 draws
    assert realised_schedule(int(q * rows * steps), rows, steps).steps == steps


def test_realised_schedule_audit_flags_a_wrong_n_claim_end_to_end_and_not_the_correct_one():
    """The suite's phantom-dp-sgd defense (fit_lm_dp) with the accountant told N×10: the
    claim is accounted at q/10, the run draws q; the epsilon audit's realised-schedule
    gradient canary exceeds the claim and the diagnosis points at accounting. The correct
    trainer adds no such audit (its realised schedule never exceeds the declared one)."""
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.epsilon.claimed_vs_audited import (
        REALISED,
        EpsilonAuditSettings,
        epsilon_audit,
    )
    from privacy_audit.audit.scale.tasks import task_data, task_target
    from privacy_audit.targets.classifier import TrainingConfig

    cfg = parse_config(
        {
            "seed": 0,
            "data": {"n_members": 48, "n_nonmembers": 48, "n_test": 12},
            "target": {"preset": "tiny-gpt2-word", "max_length": 16},
            "defenses": [{"name": "none"}],
        }
    )
    data = task_data(cfg)
    target = task_target(cfg, data)
    training = TrainingConfig(
        epochs=2, batch_size=12, learning_rate=3e-3, max_length=16, progress=False
    )
    settings = EpsilonAuditSettings(gradient_trials=20_000, white_box_canaries=0)
    out = {}
    for bug in (None, "accountant-wrong-n"):
        with dp_bugs.planted(bug):
            release, _ = DEFENSES["phantom-dp-sgd"](epsilon=1.0, accountant="rdp").fit(
                target, data.members, training, 0
            )
        claim = {**release.claim.__dict__}
        out[bug] = epsilon_audit({"claim": claim, "attacks": []}, release, None, settings)
    names = [a["name"] for a in out[None]["audits"]]
    assert REALISED not in names and out[None]["status"] != "violated"
    bad = out["accountant-wrong-n"]
    (real,) = [a for a in bad["audits"] if a["name"] == REALISED]
    assert real["exceeds_claim"] and bad["status"] == "violated"
    assert bad["diagnosis"]["bug_classes"][0].startswith("accounting")


def _anchor_engine(bug, anchors=200, present=True, sigma=0.0, seed=0):
    from privacy_audit.defenses.dp_sgd_with_canaries import AnchorPairCanary, quiet_coordinate

    model = _lm(seed)
    engine = DPSGDEngine(model, C, sigma, 10.0, norms="explicit")
    pair = AnchorPairCanary(
        engine.params, C, quiet_coordinate(engine.params, None, seed), present, anchors
    )
    engine.sampled_canaries = pair
    return model, engine, pair


def test_anchor_pair_is_drawn_with_the_canary_and_flips_the_clipped_sum_by_2c():
    """The trainer's own Poisson sampler (q = 0.05, 400 steps, σ = 0): at least one of
    the K = 200 anchor copies is in every batch that holds the canary; with the bug the
    released value at j is +C then and −C with the anchor alone (a 2C move), while
    per-example clipping releases 1 − K_t vs −K_t (a C move)."""
    empty = torch.zeros((0, 8), dtype=torch.long)
    for bug in ("clip-after-aggregation", None):
        _, engine, pair = _anchor_engine(bug)
        with dp_bugs.planted(bug):
            train_private_ids(engine, empty, empty, 400, 0.05, 0.0, seed=5)
        k = np.asarray(pair.anchor_counts)
        c = np.asarray(pair.canary_steps)
        o = np.asarray(pair.observations)
        assert 8 <= c.sum() <= 40 and (k[c] > 0).all()  # ~Binomial(400, 0.05) canary steps
        want = np.where(c, 1.0, -1.0) if bug else c - k.astype(float)
        np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-5)


def test_anchor_pair_release_under_the_bug_equals_the_hand_computation():
    """Real rows, anchor copies and the canary in one batch: the released update is
    clip_C(Σ real g_i − K·A·C·e_j + G·C·e_j) (autograd per example, by hand), +C at j."""
    model, engine, pair = _anchor_engine("clip-after-aggregation", anchors=5)
    ids = _ids()
    params, per = _per_example_grads(model, ids)
    pair.set_batch(torch.tensor([True, True, False, True, False, True]))  # 3 anchors + canary
    with dp_bugs.planted("clip-after-aggregation"):
        out = engine.private_gradients(ids, torch.ones_like(ids), torch.Generator())
    total = [sum(per[i][k] for i in range(len(ids))) for k in range(len(params))]
    pk, local = pair.coordinate
    assert params[pk] is engine.params[pk]
    total[pk].view(-1)[local] += (pair.canary_magnitude - 3 * pair.anchor_magnitude) * C
    norm = float(torch.sqrt(sum((t**2).sum() for t in total)))
    for k, p in enumerate(params):
        torch.testing.assert_close(
            out[p] * 10.0, total[k] * (C / (norm + 1e-6)), atol=1e-6, rtol=1e-4
        )
    assert pair.observations == [pytest.approx(C, rel=1e-4)]


def test_anchor_pair_score_is_the_likelihood_ratio_of_plus_one_against_minus_one():
    from scipy.stats import norm

    from privacy_audit.defenses.dp_sgd_with_canaries import AnchorPairCanary

    pair = AnchorPairCanary([torch.nn.Parameter(torch.zeros(2, 2))], C, (0, 0), True, 3)
    pair.observations = [0.3, -1.2, 2.0]
    q, s = 0.1, 1.3
    o = np.array(pair.observations)
    want = np.log(1 - q + q * norm.pdf(o, 1, s) / norm.pdf(o, -1, s)).sum()
    assert pair.score(s, q) == pytest.approx(want, rel=1e-10)
    with pytest.raises(ValueError, match="outweigh"):
        AnchorPairCanary(pair.params, C, (0, 0), True, 3, anchor_magnitude=10, canary_magnitude=30)


def _opacus_release(bug, rows, model_and_tok, clip=1e-3):
    """The classifier trainer's release for one batch at σ = 0: the defense's model (the
    planted layer inserted as ``DPSGD.fit`` does), Opacus's ``make_private`` and its
    DPOptimizer clipping; returns (Σ clipped per-sample gradients, Opacus's per-sample
    gradient of row 0)."""
    import copy
    import warnings

    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    from privacy_audit.targets.classifier import encode, forward_kwargs

    model, tok = copy.deepcopy(model_and_tok[0]), model_and_tok[1]
    model.train()  # the session fixture may have been left in eval mode by another test
    if bug:
        dp_bugs.insert_batch_norm(model)
    for m in model.modules():  # no dropout: batches of different sizes draw alike
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    ids, mask = encode(tok, [r[0] for r in rows], 32)
    y = torch.tensor([r[1] for r in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm, opt, _ = PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
            data_loader=DataLoader(TensorDataset(ids, mask, y), batch_size=4),
            noise_multiplier=0.0,
            max_grad_norm=clip,
            poisson_sampling=False,
        )
    gsm.train()
    with warnings.catch_warnings():  # Opacus's full-backward-hook notice on the embeddings
        warnings.simplefilter("ignore")
        out = gsm(**forward_kwargs(gsm, ids, mask))
        torch.nn.functional.cross_entropy(out.logits, y).backward()
    first = torch.cat([p.grad_sample[0].flatten() for p in opt.params])
    opt.pre_step()
    return torch.cat([p.grad.flatten() for p in opt.params]) * opt.expected_batch_size, first


def test_batch_norm_bug_lets_one_example_move_the_others_clipped_gradients(tiny_model):
    """Batch A = 8 copies of one record (a dataset may hold duplicates), A' = A + one
    other record, clip C = 10⁻³ (every per-sample gradient is clipped). Correct trainer:
    row 0's per-sample gradient is the same in A and A' (and equals plain autograd on row
    0 alone), and the release moves by exactly C. With the batch statistics layer the
    added record changes row 0's clipped gradient and moves the release by > 5C."""
    import copy

    from privacy_audit.targets.classifier import encode, forward_kwargs

    C_ = 1e-3
    a = [("the quick brown fox", 0)] * 8
    b = a + [("a completely different sentence about prices", 1)]
    rel_a, first_a = _opacus_release(None, a, tiny_model, C_)
    rel_b, first_b = _opacus_release(None, b, tiny_model, C_)
    assert float((rel_b - rel_a).norm()) == pytest.approx(C_, rel=1e-3)
    torch.testing.assert_close(first_a, first_b, atol=1e-6, rtol=1e-4)
    # independent: plain autograd on row 0 alone
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    ids, mask = encode(tok, [a[0][0]], 32)
    loss = torch.nn.functional.cross_entropy(
        model(**forward_kwargs(model, ids, mask)).logits, torch.tensor([0])
    )
    params = [p for p in model.parameters() if p.requires_grad]
    want = torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])
    torch.testing.assert_close(first_a, want, atol=1e-6, rtol=1e-3)

    bug = "batch-norm-classifier"
    rel_a, first_a = _opacus_release(bug, a, tiny_model, C_)
    rel_b, first_b = _opacus_release(bug, b, tiny_model, C_)
    assert float((first_b - first_a).norm()) > 0.1 * float(first_a.norm())
    assert float((rel_b - rel_a).norm()) > 5 * C_  # sensitivity no longer bounded by C


def test_batch_norm_bug_is_planted_in_the_classifier_trainer_only_inside_the_context(
    tiny_model, fixture_examples, monkeypatch
):
    """``DPSGD.fit`` inserts the layer only under the planted bug (the noise calibration,
    not under test here, is stubbed to σ = 1 to keep the test short)."""
    import privacy_audit.defenses.calibration as calibration

    monkeypatch.setattr(calibration, "bounded_noise_multiplier", lambda **kw: 1.0)
    from privacy_audit.defenses.dp_bugs import BatchStatNorm
    from privacy_audit.targets.classifier import TrainingConfig

    class _Target:
        label_names = ("a", "b", "c", "d")

        def build(self, seed):
            import copy

            return copy.deepcopy(tiny_model[0]), tiny_model[1]

    training = TrainingConfig(epochs=1, batch_size=4, max_length=16, progress=False)
    for bug in (None, "batch-norm-classifier"):
        with dp_bugs.planted(bug):
            release, _ = DEFENSES["dp-sgd"](epsilon=8.0).fit(
                _Target(), fixture_examples, training, 0
            )
        has = any(isinstance(m, BatchStatNorm) for m in release.model.modules())
        assert has == (bug is not None)


def _bisect(f, delta, hi=60.0):
    lo = 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > delta else (lo, mid)
    return lo


def test_shuffle_lower_bound_is_the_gaussian_mechanism_with_one_step_and_above_the_cube_bound():
    """Chua et al.'s pair, computed by the binned max statistic: with one step per epoch
    it is E Gaussian releases of sensitivity 1 (closed form, Balle & Wang 2018, by scipy);
    with 19 steps and one epoch it is at least the "cube" bound max_C P(max > C) −
    e^ε·Q(max > C) (by scipy), and below the no-amplification upper bound."""
    from scipy.stats import norm

    from experiments.dp_bugs import shuffle_lower_bound

    sigma, d = 1.117, 1e-5
    mu = math.sqrt(2) / sigma

    def gauss(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    upper = _bisect(gauss, d)
    assert shuffle_lower_bound(sigma, 1, 2, d) == pytest.approx(upper, abs=2e-3)
    caps = np.linspace(-2, 12, 20001)

    def cube(eps, t=19):
        out = [
            -np.expm1(norm.logcdf((caps - m) / sigma) + (t - 1) * norm.logcdf(caps / sigma))
            for m in (2.0, 1.0)
        ]
        return float(np.max(out[0] - math.exp(eps) * out[1]))

    one = shuffle_lower_bound(sigma, 19, 1, d)
    assert one >= _bisect(cube, d) - 1e-3
    two = shuffle_lower_bound(sigma, 19, 2, d)
    assert one < two < upper  # composition adds; shuffling is not worse than no sampling


def test_benchmark_rejects_a_bug_of_the_other_trainer_and_a_tiny_anchor_pair(tmp_path, capsys):
    from experiments.dp_bugs import CLASSIFIER_VARIANTS, VARIANTS, main

    out = tmp_path / "o.json"
    assert main(["--classifier", "--bugs", "clip-after-aggregation", "--out", str(out)]) == 2
    assert "not a classifier bug" in capsys.readouterr().err
    assert main(["--bugs", "batch-norm-classifier", "--out", str(out)]) == 2
    assert main(["--anchor-pair", "1", "--out", str(out)]) == 2
    assert not out.exists()
    assert (
        "batch-norm-classifier" in CLASSIFIER_VARIANTS and "batch-norm-classifier" not in VARIANTS
    )


def test_anchor_pair_runs_never_share_a_random_stream():
    """Each run seeds its sampler with s and its noise with s + 1 (train_private_ids):
    across both sides, runs and seeds no stream is reused (independent trials)."""
    from experiments.dp_bugs import anchor_run_seed

    streams = [
        anchor_run_seed(s, r, p) + k
        for s in range(3)
        for r in range(2000)
        for p in (True, False)
        for k in (0, 1)
    ]
    assert len(set(streams)) == len(streams)


def _lone_release(bug, sigma, steps, present=True, seed=7):
    """The real trainer (its Poisson sampler, clipping and noise code) on the lone-canary
    dataset: the canary row alone; returns (canary drawn per step, release at j / C)."""
    from privacy_audit.defenses.dp_sgd_with_canaries import LoneCanary, quiet_coordinate

    model = _lm(seed)
    engine = DPSGDEngine(model, C, sigma, 0.05, norms="explicit")
    lone = LoneCanary(engine.params, C, quiet_coordinate(engine.params, None, seed), present)
    engine.sampled_canaries = lone
    empty = torch.zeros((0, 8), dtype=torch.long)
    with dp_bugs.planted(bug):
        train_private_ids(engine, empty, empty, steps, 0.05, 0.0, seed=seed)
    return np.asarray(lone.canary_steps), np.asarray(lone.observations)


def test_lone_canary_release_is_the_clipped_canary_plus_noise_sigma_c_over_2_under_the_bug():
    """Known answer for the crafted accumulation audit: at σ = 0 the release at j is
    exactly C when the trainer's sampler drew the canary (its 10·C gradient clipped to
    C) and 0 otherwise; at σ = 1 the residual o_t − 1[drawn] has sd σ/√k = σ/2 with
    ``accumulation-noise-once`` and σ with the correct trainer (1,000 steps each:
    chi-square interval at 10⁻³ for the variance, a z-test for the mean), and the
    canary's draws are Binomial(1000, 0.05)."""
    from scipy.stats import binom, chi2

    drawn, o = _lone_release("accumulation-noise-once", 0.0, 150)
    np.testing.assert_allclose(o, drawn.astype(float), atol=1e-6)
    assert drawn.sum() > 0
    n = 1000
    for bug, want in (("accumulation-noise-once", 0.5), (None, 1.0)):
        drawn, o = _lone_release(bug, 1.0, n)
        assert binom.ppf(5e-4, n, 0.05) <= drawn.sum() <= binom.ppf(1 - 5e-4, n, 0.05)
        r = o - drawn
        stat = (n - 1) * r.var(ddof=1) / want**2
        assert chi2.ppf(5e-4, n - 1) <= stat <= chi2.ppf(1 - 5e-4, n - 1), (bug, r.std())
        assert abs(r.mean()) < 3.3 * want / math.sqrt(n)
    _, absent = _lone_release("accumulation-noise-once", 0.0, 50, present=False)
    assert not absent.any()  # without the canary nothing reaches j


def test_lone_canary_score_is_the_likelihood_ratio_of_one_against_zero():
    from scipy.stats import norm

    from privacy_audit.defenses.dp_sgd_with_canaries import LoneCanary

    lone = LoneCanary([torch.nn.Parameter(torch.zeros(2, 2))], C, (0, 0), True)
    lone.observations = [0.3, -1.2, 2.0, 0.9]
    q, s = 0.1, 0.55
    o = np.array(lone.observations)
    want = np.log(1 - q + q * norm.pdf(o, 1, s) / norm.pdf(o, 0, s)).sum()
    assert lone.score(s, q) == pytest.approx(want, rel=1e-10)
    with pytest.raises(ValueError, match="magnitude"):
        LoneCanary(lone.params, C, (0, 0), True, magnitude=0.5)


def test_lone_canary_audit_resumes_from_its_checkpoint_and_never_from_another_audits(tmp_path):
    """A killed audit resumes from its saved runs with the same numbers (runs are seeded
    one by one); a checkpoint written for another seed is not reused."""
    from experiments.dp_bugs import Setup, anchor_pair_audit

    setup, ck = Setup(), str(tmp_path / "ck.json")
    bug = "accumulation-noise-once"
    first = anchor_pair_audit(bug, 0, 3, setup, design="lone-canary", checkpoint=ck, every=1)
    saved = json.loads(Path(ck).read_text())
    assert len(saved["runs"]) == 4  # 2 pairs saved, the 3rd not (the audit finished)
    again = anchor_pair_audit(bug, 0, 3, setup, design="lone-canary", checkpoint=ck, every=1)
    assert again["scores_in"] == first["scores_in"] and again["eps"] == first["eps"]
    other = anchor_pair_audit(bug, 1, 3, setup, design="lone-canary", checkpoint=ck)
    fresh = anchor_pair_audit(bug, 1, 3, setup, design="lone-canary")
    assert other["scores_in"] == fresh["scores_in"] != first["scores_in"]


def test_lone_canary_benchmark_end_to_end_and_bad_options(tmp_path, capsys):
    from experiments.dp_bugs import LONE_CANARY, main

    out = tmp_path / "lone.json"
    assert main(["--lone-canary", "1", "--out", str(out)]) == 2
    assert main(["--lone-canary", "3", "--anchor-pair", "3", "--out", str(out)]) == 2
    assert main(["--lone-canary", "3", "--first-seed", "-1", "--out", str(out)]) == 2
    assert "--lone-canary" in capsys.readouterr().err and not out.exists()
    args = ["--lone-canary", "3", "--seeds", "1", "--first-seed", "2", "--bugs", "none"]
    assert main([*args, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (cell,) = res["cells"]["correct"]["audits"].items()
    assert cell[0] == f"{LONE_CANARY}, 3 runs per side"
    assert cell[1]["seed_per_seed"] == [2] and len(cell[1]["scores_per_seed"][0]["in"]) == 3
    assert not list(tmp_path.glob("*.partial*"))  # the audit's checkpoint is removed


def test_crafted_cell_summary_counts_detections_with_the_exact_interval():
    """The per-seed summary every crafted-dataset cell reports: detections counted from the
    seeds' verdicts, the interval equal to scipy's exact (Clopper-Pearson) binomial interval,
    the median and largest bound, the mean CPU cost (a hand example)."""
    from scipy.stats import binomtest

    from experiments.dp_bugs import _seed_summary

    rs = [
        {"violated": v, "eps": e, "ceiling": 3.3, "cpu_s": c}
        for v, e, c in [(True, 2.5, 10.0), (False, 0.4, 12.0), (True, 2.1, 11.0), (True, 3.0, 9.0)]
    ]
    s = _seed_summary(rs)
    assert (s["detected"], s["seeds"], s["rate"]) == (3, 4, 0.75)
    ci = binomtest(3, 4).proportion_ci(confidence_level=0.95, method="exact")
    assert s["ci95"] == pytest.approx([ci.low, ci.high], abs=1e-12)
    assert s["median_bound"] == pytest.approx(2.3) and s["max_bound"] == 3.0
    assert s["cpu_s_per_seed"] == pytest.approx(10.5) and s["ceiling"] == 3.3
    assert s["violated_per_seed"] == [True, False, True, True]
    assert s["bound_per_seed"] == [2.5, 0.4, 2.1, 3.0]
