"""dp-forward: aMGM calibration, sensitivity control, noise positions, claim and errors."""

from __future__ import annotations

import json
import math
import warnings
import zlib

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from privacy_audit.defenses import DEFENSES
from privacy_audit.defenses.dp_forward import (
    DPForward,
    NoiseController,
    amgm_delta,
    amgm_sigma,
    analytic_gaussian_bound,
    classical_gaussian_sigma,
    composed_epsilon,
    epsilon_from_sigma,
    frobenius_bound,
    parse_position,
    randomized_response,
    row_normalize,
    rr_keep_probability,
)
from privacy_audit.ground.errors import ConfigError

EPS = (0.5, 1, 2, 4, 8, 16)
# Reference values from the paper notes (/shared/notes/seeds/dp_forward.md §5.2), which
# agree with the authors' matrix_gaussian_noise to 1e-10.
REF_B = {
    1e-5: (0.14221, 0.26805, 0.50155, 0.92493, 1.66603, 2.90548),
    1e-6: (0.12411, 0.23670, 0.44833, 0.83786, 1.53155, 2.71288),
}
REF_SIGMA_S2_1 = (7.0318, 3.7306, 1.9938, 1.0812, 0.6002, 0.3442)


@pytest.mark.parametrize("delta", sorted(REF_B))
def test_bound_matches_reference_values(delta):
    for eps, ref in zip(EPS, REF_B[delta], strict=True):
        assert abs(analytic_gaussian_bound(eps, delta) - ref) < 1e-4
    for eps, ref in zip(EPS, REF_SIGMA_S2_1, strict=True):
        assert amgm_sigma(eps, 1e-5, 1.0) == pytest.approx(ref, abs=1e-4)


def test_profile_identity_over_grid():
    """δ(ε, B(ε, δ)) = δ to 1e-10 over ε ∈ [0.1, 32], δ ∈ [1e-8, 1e-2]."""
    worst = 0.0
    for eps in np.geomspace(0.1, 32, 21):
        for delta in np.geomspace(1e-8, 1e-2, 13):
            B = analytic_gaussian_bound(eps, delta)
            worst = max(worst, abs(amgm_delta(eps, B) - delta))
            # Algorithm 1's branch: B ≤ √(2ε) iff δ ≤ δ0 = δ(ε, √(2ε))
            assert (B <= math.sqrt(2 * eps) + 1e-12) == (
                delta <= amgm_delta(eps, math.sqrt(2 * eps))
            )
    assert worst < 1e-10


def test_bound_is_monotone_finite_at_large_epsilon_and_inverts():
    bs = [analytic_gaussian_bound(e, 1e-5) for e in (0.1, 1, 10, 100, 1000)]
    assert all(math.isfinite(b) for b in bs) and bs == sorted(bs) and len(set(bs)) == 5
    assert analytic_gaussian_bound(4, 1e-7) < analytic_gaussian_bound(4, 1e-5)
    for eps in (0.3, 2.0, 8.0, 24.0):
        sigma = amgm_sigma(eps, 1e-5, 2.0)
        assert epsilon_from_sigma(sigma, 2.0, 1e-5) == pytest.approx(eps, rel=1e-8)
    # k releases of a B-GDP mechanism: one release gives back ε; more releases cost more
    B = analytic_gaussian_bound(8, 1e-5)
    assert composed_epsilon(B, 1, 1e-5) == pytest.approx(8, rel=1e-8)
    assert composed_epsilon(B, 4, 1e-5) > 8


def test_classical_gaussian_warns_above_one_and_amgm_is_tighter_where_valid():
    for eps in (0.1, 0.5, 1.0):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            gm = classical_gaussian_sigma(eps, 1e-5, 1.0)
        assert amgm_sigma(eps, 1e-5, 1.0) < gm
    assert classical_gaussian_sigma(1.0, 1e-5, 1.0) == pytest.approx(4.8448, abs=1e-4)
    with pytest.warns(UserWarning, match="only valid for epsilon <= 1"):
        gm16 = classical_gaussian_sigma(16, 1e-5, 2.0)
    # the notes' pitfall: above ε ≈ 8.4 the (invalid) classical formula gives *less* noise
    assert gm16 < amgm_sigma(16, 1e-5, 2.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: analytic_gaussian_bound(0, 1e-5), "epsilon must be a positive"),
        (lambda: analytic_gaussian_bound(-1, 1e-5), "epsilon must be a positive"),
        (lambda: analytic_gaussian_bound(1, 0), r"delta must be in \(0, 1\)"),
        (lambda: analytic_gaussian_bound(1, 1.0), r"delta must be in \(0, 1\)"),
        (lambda: amgm_sigma(1, 1e-5, 0), "sensitivity must be"),
        (lambda: DPForward(epsilon=0), "epsilon must be a positive"),
        (lambda: DPForward(delta=1.5), r"delta must be in \(0, 1\)"),
        (lambda: DPForward(position="decoder.1"), "unknown dp-forward position 'decoder.1'"),
        (lambda: DPForward(position="encoder.2.mlp"), "unknown dp-forward sub-layer 'mlp'"),
        (lambda: DPForward(position="encoder.0"), "encoder index must be >= 1"),
        (lambda: DPForward(sensitivity="token", position="pooled"), "only valid at position"),
        (lambda: DPForward(norm_mode="squash"), "unknown dp-forward norm_mode"),
    ],
)
def test_bad_parameters_raise_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_mvg_installs_with_the_block_shape_of_its_position(tiny_model):
    from privacy_audit.defenses.dp_forward import mvg_sigma

    model, _ = tiny_model
    d = model.config.hidden_size
    ctl = DPForward(mechanism="mvg", position="encoder.1").install(model, 0, max_length=8)
    assert ctl.sigma == pytest.approx(mvg_sigma(8.0, 1e-5, 8, d, 1.0, 2.0))
    ctl.remove()
    ctl = DPForward(mechanism="mvg", position="pooled").install(model, 0)
    assert ctl.sigma == pytest.approx(mvg_sigma(8.0, 1e-5, 1, d, 1.0, 2.0))
    ctl.remove()
    with pytest.raises(ValueError, match="max_length"):
        DPForward(mechanism="mvg", position="embedding").install(model, 0)


def test_model_dependent_errors(tiny_model):
    model, _ = tiny_model
    with pytest.raises(ConfigError, match=r"encoder index 3 is out of range: the model has 2"):
        DPForward(position="encoder.3").install(model, 0)
    with pytest.raises(ConfigError, match="has no encoder stack"):
        DPForward().install(torch.nn.Sequential(torch.nn.Linear(4, 2)), 0)


def test_bad_position_in_config_is_one_line_exit_2(cli, tmp_path, tiny_config_path):
    cfg = tmp_path / "bad.toml"
    text = tiny_config_path.read_text().replace(
        'name = "dp-sgd"', 'name = "dp-forward"\nposition = "encoder.x"'
    )
    cfg.write_text(text)
    out = cli(["run", str(cfg), "--out", str(tmp_path / "o")])
    assert out.code == 2
    assert "unknown dp-forward position 'encoder.x'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_registered_and_positions_parse():
    assert DEFENSES["dp-forward"] is DPForward
    assert parse_position("encoder.3").name == "encoder.3.add-norm-2"
    assert parse_position("encoder.1.attention").sub == "attention"
    assert not parse_position("pooled").is_token_block


def test_monte_carlo_noise_std_is_s2_over_b_and_clipping_bounds_the_norm():
    gen = torch.Generator().manual_seed(0)
    h = 5 * torch.randn(64, 16, 32, generator=gen)
    clipped = frobenius_bound(h, 1.0, "clip")
    assert clipped.flatten(1).norm(dim=1).max() <= 1.0 + 1e-6
    small = 0.001 * h  # block norms ≈ 0.11 < C
    assert torch.allclose(frobenius_bound(small, 1.0, "clip"), small)  # under C: unchanged
    normed = frobenius_bound(small, 1.0, "normalize")
    assert torch.allclose(normed.flatten(1).norm(dim=1), torch.ones(64), atol=1e-5)
    rows = row_normalize(h, 0.5, torch.ones(64, 16))
    assert torch.allclose(rows.norm(dim=-1), torch.full((64, 16), 0.5), atol=1e-5)

    d = DPForward(epsilon=4.0, delta=1e-5, position="pooled")
    cal = d.calibration()
    assert cal["sigma"] == pytest.approx(2.0 / analytic_gaussian_bound(4.0, 1e-5))
    ctl = NoiseController.__new__(NoiseController)  # release() alone, no model needed
    ctl.C, ctl.sigma, ctl.sensitivity, ctl.norm_mode = 1.0, cal["sigma"], "sequence", "clip"
    ctl.active, ctl.capture, ctl._mask, ctl._gens, ctl.seed = True, False, None, {}, 0
    x = torch.randn(2000, 64, generator=gen)
    noise = (ctl.release(x) - frobenius_bound(x, 1.0, "clip")).double().flatten()
    n = noise.numel()
    ss = float((noise**2).sum())
    # exact 99.9% chi-square interval for σ from n i.i.d. N(0, σ²) draws
    lo, hi = math.sqrt(ss / chi2.ppf(0.9995, n)), math.sqrt(ss / chi2.ppf(0.0005, n))
    assert lo <= cal["sigma"] <= hi
    assert abs(float(noise.mean())) < 4 * cal["sigma"] / math.sqrt(n)


def test_token_level_one_token_changes_one_row(tiny_model):
    model, tokenizer = tiny_model
    model = __import__("copy").deepcopy(model).eval()
    d = DPForward(position="embedding", sensitivity="token")
    ctl = d.install(model, 0)
    ctl.active, ctl.capture = False, True
    ids = tokenizer(["my parcel never arrived"], return_tensors="pt")["input_ids"]
    ids2 = ids.clone()
    ids2[0, 2] = tokenizer.convert_tokens_to_ids("refund")
    outs = []
    for x in (ids, ids2):
        ctl.captured = []
        model(input_ids=x, attention_mask=torch.ones_like(x))
        outs.append(ctl.captured[0][0][0])
    changed = (outs[0] - outs[1]).norm(dim=1) > 1e-6
    assert changed.tolist() == [i == 2 for i in range(ids.shape[1])]
    assert torch.allclose(outs[0].norm(dim=1), torch.ones(ids.shape[1]), atol=1e-5)


@pytest.mark.parametrize("sub", ["attention", "ffn"])
def test_residual_is_dropped_at_noised_sublayers(tiny_model, sub):
    """With noise off, the noised sub-layer's output is LN(normalized sublayer output): the
    clean residual input does not reach the server."""
    model, tokenizer = tiny_model
    model = __import__("copy").deepcopy(model).eval()
    ctl = DPForward(position=f"encoder.1.{sub}").install(model, 0)
    ctl.active = False
    layer = model.bert.encoder.layer[0]
    mod = layer.attention.output if sub == "attention" else layer.output
    seen = {}
    mod.register_forward_hook(lambda m, a, o: seen.update(args=a, out=o))
    x = tokenizer(["where is my order"], return_tensors="pt")["input_ids"]
    model(input_ids=x, attention_mask=torch.ones_like(x))
    sub_in, residual = seen["args"][0], seen["args"][1]
    assert torch.count_nonzero(residual) == 0
    expect = mod.LayerNorm(frobenius_bound(mod.dense(sub_in), 1.0, "normalize"))
    assert torch.allclose(seen["out"], expect, atol=1e-5)


def test_claim_local_and_central_epsilon_and_labels():
    d = DPForward(epsilon=8.0, delta=1e-5, position="pooled")
    claim = d.claim(n_users=1000, epochs=3, n_classes=4)
    assert claim.notion == "local-dp" and claim.unit == "sequence" and claim.proven
    assert claim.epsilon == 8.0 and claim.details["S2"] == 2.0
    central = claim.details["central_epsilon_shuffled"]
    assert 0 < central < 8 < claim.details["epsilon_composed_training"]
    assert "not a formal shuffle bound" in claim.note
    # claimed = the larger of the two tight accountants; RDP reported beside, looser, unclaimed
    det = claim.details
    assert central == pytest.approx(max(det["central_epsilon_pld"], det["central_epsilon_prv"]))
    assert det["central_epsilon_rdp_not_claimed"] > central
    assert "PLD" in claim.note and "PRV" in claim.note and "not claimed" in claim.note
    # at large ε the composed local ε caps the shuffle estimate
    big = DPForward(epsilon=32.0).claim(1000, 4, 4).details
    assert big["central_epsilon_shuffled"] == big["epsilon_composed_training"]
    # more users: more amplification
    assert d.claim(10_000, 3, 4).details["central_epsilon_shuffled"] < central
    rr = DPForward(epsilon=8.0, epsilon2=math.log(9)).claim(1000, 3, 2)
    assert rr.epsilon == pytest.approx(8 + math.log(9)) and "randomized response" in rr.note
    paper = DPForward(s2_factor=1.0).claim(1000, 3, 2)
    assert not paper.proven and "not proven" in paper.note
    assert not DPForward(freeze_pre_noise=False).claim(1000, 3, 2).proven
    assert DPForward(sensitivity="token", position="embedding").claim(10, 1, 2).unit == "token"


def test_label_randomized_response_keep_rate():
    assert rr_keep_probability(math.log(9), 2) == pytest.approx(0.9)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 20_000)
    z = randomized_response(y, 1.0, 4, rng)
    keep = rr_keep_probability(1.0, 4)
    kept = float((z == y).mean())
    assert abs(kept - keep) < 4 * math.sqrt(keep * (1 - keep) / len(y))
    assert set(np.unique(z)) <= {0, 1, 2, 3}


def test_bench_dp_forward_times_three_cases_side_by_side(cli, tmp_path):
    out = tmp_path / "bench.json"
    res = cli(
        ["bench", "dp-forward", "--quick", "--repeats", "1", "--warmup", "0", "--out", str(out)]
    )
    assert res.code == 0, res.stderr[-2000:]
    (b,) = json.loads(out.read_text())["benchmarks"]
    assert set(b["cases"]) == {"tiny/non-private", "tiny/dp-forward", "tiny/dp-sgd"}
    assert b["ratios"]["tiny/non-private"] == 1.0 and b["ratios"]["tiny/dp-forward"] > 0
    sgd_over_dpf = b["ratios"]["tiny/dp-sgd"] / b["ratios"]["tiny/dp-forward"]
    assert b["ratios"]["tiny/dp-sgd/dp-forward"] == pytest.approx(sgd_over_dpf)
    assert "target <= 1.1x" in b["targets"]["tiny/dp-forward"] and "tiny/dp-forward" in res.stdout
    mem = b["memory"]  # peak step memory per case (Linux /proc), and the two ratios
    assert all(mem[f"tiny/{k}"] is None or mem[f"tiny/{k}"] >= 0 for k in ("dp-forward", "dp-sgd"))
    if mem["tiny/dp-sgd"] and mem["tiny/dp-forward"]:
        assert mem["tiny/dp-sgd/dp-forward"] == pytest.approx(
            mem["tiny/dp-sgd"] / mem["tiny/dp-forward"]
        )


class _TokenRelease:
    """A non-dp-forward release exposing token rows: rows = table[ids] · scale + shift + noise."""

    def __init__(self, noise: float, seed: int = 0):
        from privacy_audit.defenses.base import PrivacyClaim, ReleasedModel, Surface

        rng = np.random.default_rng(seed)
        table = rng.normal(size=(300, 24))
        attr_dir = rng.normal(size=(3, 24))

        class R(ReleasedModel):
            surfaces = frozenset({Surface.TOKEN_HIDDEN, Surface.HIDDEN})
            claim = PrivacyClaim.none()
            label_names = ["a", "b"]

            def _ids(self, texts):
                return [np.array([zlib.crc32(w.encode()) % 300 for w in t.split()]) for t in texts]

            def token_ids(self, texts):
                return self._ids(texts)

            def token_hidden(self, texts):
                r = np.random.default_rng(seed + 1)
                return [
                    3.0 * table[i] + 0.5 + noise * r.normal(size=(len(i), 24))
                    for i in self._ids(texts)
                ]

            def hidden(self, texts):  # the attribute is the text's first word
                r = np.random.default_rng(seed + 2)
                idx = [["north", "coast", "mountain"].index(t.split()[0]) for t in texts]
                return attr_dir[idx] + noise * r.normal(size=(len(texts), 24))

            def vocabulary_embeddings(self):
                return table

            def decode_tokens(self, ids):
                return [str(i) for i in ids]

        self.release = R()


def _context(n: int = 300):
    from privacy_audit.attacks.base import AttackContext, MetricSettings
    from privacy_audit.defenses.base import Examples

    rng = np.random.default_rng(5)
    regions = ["north", "coast", "mountain"]

    def ex(k, off):
        attrs = [regions[i] for i in rng.choice(3, size=k, p=[0.5, 0.3, 0.2])]
        texts = [f"{a} w{off + i} x{i % 7} y{i % 11}" for i, a in enumerate(attrs)]
        return Examples([f"d{off + i}" for i in range(k)], texts, np.zeros(k), attributes=attrs)

    return AttackContext(ex(n, 0), ex(n, n), ex(2 * n, 2 * n), settings=MetricSettings(n_boot=200))


@pytest.mark.parametrize("noise, high", [(0.05, True), (30.0, False)])
def test_attacks_work_on_any_release_exposing_the_surfaces(noise, high):
    from privacy_audit.attacks import LEAKAGE_ATTACKS, run_leakage_attack

    release = _TokenRelease(noise).release
    ctx = _context()
    for name in ("inversion-nn", "inversion-relaxed"):
        res = run_leakage_attack(LEAKAGE_ATTACKS[name](n_sequences=8), release, ctx)
        recall = res.metrics["token_recall"]
        assert (recall["value"] >= 0.95) if high else (recall["ci_high"] < 0.2), (name, recall)
    res = run_leakage_attack(LEAKAGE_ATTACKS["attribute-inference"](max_iter=100), release, ctx)
    assert res.status == "ok", res.reason
    bal = res.metrics["balanced_accuracy"]
    assert res.details["oversampled"] and res.metrics["majority_accuracy_baseline"]["n"] == 600
    assert (bal["ci_low"] > 0.9) if high else (abs(bal["value"] - 1 / 3) < 0.1)


# --------------------------------------------------------------------------------------
# issue 19: tight central accounting, GM / MVG calibrations, Text2Text, experiments
# --------------------------------------------------------------------------------------


def test_pld_central_epsilon_at_the_papers_sst2_setting_is_about_one():
    """Paper §5.4 / Table 5: SST-2, N = 67,349, 3 epochs, z = 0.460 gives central ε ≈ 1 by
    PRV. dp-accounting PLD must agree within 0.05; RDP (2.78) is far looser."""
    from privacy_audit.defenses.dp_engine import epsilon_pld
    from privacy_audit.defenses.dp_sgd import dp_accounting_epsilon

    n = 67_349
    pld = epsilon_pld(0.460, 1 / n, 3 * n, 1e-5)
    assert abs(pld - 1.0) <= 0.05
    assert dp_accounting_epsilon(0.460, 1 / n, 3 * n, 1e-5) > 2.5


def test_central_accounting_claims_the_larger_tight_accountant_and_calibrates_safely():
    from privacy_audit.defenses.dp_forward import (
        central_epsilon_accounting,
        central_noise_multiplier,
        epsilon_for_noise_multiplier,
        shuffled_central_epsilon,
    )

    acct = central_epsilon_accounting(0.8, 500, 3, 1e-5)
    assert acct["claimed"] == max(acct["pld"], acct["prv"]) < acct["rdp"]
    assert abs(acct["pld"] - acct["prv"]) < 0.05 * acct["claimed"]
    z = central_noise_multiplier(2.0, 500, 3, 1e-5)
    assert shuffled_central_epsilon(z, 500, 3, 1e-5) <= 2.0
    assert shuffled_central_epsilon(z / 1.01, 500, 3, 1e-5) > 2.0  # tight to ~1 %
    # the per-release ε for that z gives at least that much noise (σ/S2 ≥ z)
    d = DPForward(epsilon=epsilon_for_noise_multiplier(z, 1e-5)).calibration()
    assert d["sigma"] / d["S2"] >= z
    # a cap (the composed local ε) skips PRV once PLD reaches it
    capped = central_epsilon_accounting(0.2, 500, 3, 1e-5, cap=5.0)
    assert capped["prv"] is None and capped["claimed"] == 5.0


def test_mvg_noise_matches_the_papers_example_and_exceeds_amgm():
    from privacy_audit.defenses.dp_forward import mvg_bound, mvg_sigma

    # §5.3: n = 128, d = 768, ε = 8, sup‖f‖_F = 1: MVG variance > 1e8 vs aMGM ≈ 0.6 (S2 = 1)
    assert mvg_sigma(8, 1e-5, 128, 768, 1.0, 1.0) ** 2 > 1e8
    assert amgm_sigma(8, 1e-5, 1.0) == pytest.approx(0.6002, abs=1e-4)
    # known answer at n = d = 1 (r = 1: H_1 = H_{1,1/2} = 1), γ = 1, S2 = 2, ε = 1, δ = 1e-5
    ln = math.log(1e-5)
    alpha, zeta = 2 + 4, 2 * math.sqrt(-ln) - 2 * ln + 1
    beta = 2 * 2 * zeta
    expect = (-beta + math.sqrt(beta**2 + 8 * alpha)) ** 2 / (4 * alpha**2)
    assert mvg_bound(1, 1e-5, 1, 1, 1.0, 2.0) == pytest.approx(expect, rel=1e-9)
    for eps in (0.5, 1, 4, 8):
        assert mvg_sigma(eps, 1e-5, 1, 384, 1.0, 2.0) > 100 * amgm_sigma(eps, 1e-5, 2.0)
    with pytest.raises(ValueError, match="block shape"):
        DPForward(mechanism="mvg").calibration()


def test_gm_and_mvg_options_claim_the_exact_epsilon_of_their_noise():
    gm_low = DPForward(mechanism="gm", epsilon=1.0).claim(1000, 3, 4)
    gm_high = DPForward(mechanism="gm", epsilon=16.0).claim(1000, 3, 4)
    # GM over-noises at ε ≤ 1 and under-noises above ε ≈ 8.4 (δ = 1e-5)
    assert gm_low.details["epsilon_per_release"] < 1.0
    assert gm_high.details["epsilon_per_release"] > 16.0
    assert gm_high.epsilon == gm_high.details["epsilon_per_release"]
    mvg = DPForward(mechanism="mvg", position="pooled", epsilon=8.0).claim(1000, 3, 4, (1, 384))
    assert mvg.details["epsilon_per_release"] < 0.01 and "MVG" in mvg.note
    with pytest.raises(ValueError, match="mechanism"):
        DPForward(mechanism="laplace")


def test_text2text_replaces_tokens_by_nearest_neighbour_of_the_noised_embedding():
    from privacy_audit.defenses.text2text import nearest_tokens, sanitize_ids

    vocab = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [5.0, 5.0]], dtype=np.float32)
    pts = np.array([[0.9, 0.1], [0.1, 0.2], [4.0, 4.5], [0.2, 0.8]], dtype=np.float32)
    assert nearest_tokens(pts, vocab).tolist() == [1, 0, 3, 2]
    rng = np.random.default_rng(0)
    vocab = rng.standard_normal((50, 8)).astype(np.float32)
    ids = rng.integers(2, 50, size=(4, 6))
    ids[:, 0] = 1  # a special token
    mask = np.ones_like(ids, dtype=bool)
    mask[0, 4:] = False
    out, stats = sanitize_ids(ids, mask, vocab, 1e6, rng, {1})
    assert (out == ids).all() and stats["share_unchanged"] == 1.0  # tiny noise: unchanged
    out, stats = sanitize_ids(ids, mask, vocab, 0.1, rng, {1})
    assert (out[:, 0] == 1).all() and (out[~mask] == ids[~mask]).all()
    assert stats["share_unchanged"] < 0.3 and stats["tokens_sanitized"] == 4 * 5 - 2


def test_experiment_cells_resume_and_summaries():
    import tempfile

    from experiments.run import (
        CellStore,
        ExperimentSettings,
        macro_auc,
        seed_summary,
    )

    calls = []
    with tempfile.TemporaryDirectory() as tmp:
        store = CellStore(tmp, "x", ExperimentSettings())
        assert store.get("a", lambda: calls.append(1) or {"v": 1.5}) == {"v": 1.5}
        again = CellStore(tmp, "x", ExperimentSettings())
        assert again.get("a", lambda: calls.append(2) or {"v": 0}) == {"v": 1.5}
        assert calls == [1] and again.reused == 1
        other = CellStore(tmp, "x", ExperimentSettings(seeds=1))  # other settings: recomputed
        assert other.get("a", lambda: {"v": 2}) == {"v": 2}
    s = seed_summary([0.5, 0.6, 0.7])
    assert s["mean"] == pytest.approx(0.6)
    assert s["ci_high"] - s["mean"] == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    probs = np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]])
    assert macro_auc(probs, np.array([0, 1, 2, 0])) == 1.0


def test_seed_interval_and_auc_bootstrap_cover_the_truth():
    """Coverage by simulation: the t-interval over 3 seeds (normal draws) and the
    bootstrap AUC interval (binormal scores, true AUC = Φ(1/√2))."""
    from scipy.stats import norm

    from experiments.run import auc_estimate, seed_summary

    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(1000):
        s = seed_summary(rng.normal(0.7, 0.05, size=3))
        hits += s["ci_low"] <= 0.7 <= s["ci_high"]
    assert 0.92 <= hits / 1000 <= 0.98
    true_auc = norm.cdf(1 / math.sqrt(2))
    hits = 0
    reps = 100  # measured: 0.915 over 200 reps with 1000 resamples (percentile bootstrap)
    for r in range(reps):
        y = np.repeat([0, 1], 100)
        score = rng.standard_normal(200) + y
        p = np.stack([1 - norm.cdf(score), norm.cdf(score)], 1)
        est = auc_estimate(p, y, n_boot=300, seed=r)
        hits += est["ci_low"] <= true_auc <= est["ci_high"]
    assert hits / reps >= 0.85
