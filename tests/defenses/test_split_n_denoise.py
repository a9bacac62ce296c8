"""The split-n-denoise defense: the paper's direction on the fixture corpus with the MiniLM
target, the adapter's surfaces and claim, and its error messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privacy_audit import fixtures
from privacy_audit.attacks.attribute_inference import AttributeInference
from privacy_audit.attacks.base import AttackContext, run_leakage_attack
from privacy_audit.attacks.embedding_inversion import NearestNeighbourInversion
from privacy_audit.attacks.mutual_info import TokenMutualInformationAttack
from privacy_audit.defenses.base import Examples, Surface
from privacy_audit.defenses.split_n_denoise import (
    Denoiser,
    SnDPipeline,
    SnDRelease,
    SplitEncoder,
    SplitNDenoise,
)
from privacy_audit.ground.errors import ConfigError
from privacy_audit.targets.classifier import TrainingConfig
from privacy_audit.targets.loading import Target, TargetSpec, minilm_path

ROWS = fixtures.load_corpus("private")
PUBLIC = fixtures.load_corpus("public")
LABELS = sorted({r["label"] for r in ROWS})


def examples(rows) -> Examples:
    return Examples(
        [r["id"] for r in rows],
        [r["text"] for r in rows],
        np.array([LABELS.index(r["label"]) for r in rows]),
        attributes=[r["attribute"] for r in rows],
    )


@pytest.fixture(scope="module")
def minilm_split():
    from transformers import AutoModel, AutoTokenizer

    path = str(minilm_path())
    model = AutoModel.from_pretrained(path, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return SplitEncoder(model, tok, 24, "mean")


def test_mi_and_inversion_rise_with_eta_on_minilm(minilm_split):
    """Token-level MI and nearest-neighbour inversion on the fixture texts increase with η."""
    members, nonmembers = examples(ROWS[:40]), examples(ROWS[40:80])
    clip = float(np.linalg.norm(minilm_split.vocab, axis=1).max())
    mi, inv = [], []
    for eta in (30.0, 100.0, 1000.0):
        release = SnDRelease(
            SnDPipeline(minilm_split, eta, clip, "metric-dp", seed=0),
            {},
            "none",
            SplitNDenoise(eta=eta).claim(eta, clip),
            LABELS,
            ("minilm",),
        )
        ctx = AttackContext(members, nonmembers, examples(PUBLIC[:40]), seed=0)
        m = run_leakage_attack(TokenMutualInformationAttack(n_boot=30), release, ctx)
        t = run_leakage_attack(NearestNeighbourInversion(n_sequences=40, metric="l2"), release, ctx)
        assert m.status == "ok" and t.status == "ok", (m.reason, t.reason)
        mi.append(m.metrics["mi_nats_per_token"])
        inv.append(t.metrics["token_recall"])
        assert m.details["estimator"] == "gaussian-copula"
    # strictly rising, with non-overlapping intervals between the ends of the grid
    assert mi[0]["value"] < mi[1]["value"] < mi[2]["value"]
    assert mi[0]["ci_high"] < mi[2]["ci_low"]
    assert inv[0]["value"] <= inv[1]["value"] < inv[2]["value"]
    assert inv[0]["ci_high"] < inv[2]["ci_low"]
    assert inv[2]["value"] > 0.9  # little noise: nearly every token is recovered


def test_denoiser_beats_no_denoising_and_server_side_on_minilm():
    """At η = 100 (server output near chance similarity), the user-side denoiser's cosine
    to the clean embedding clearly beats no denoising and beats the server-side denoiser;
    the local-only control is reported beside it."""
    target = Target(
        TargetSpec("minilm", None, 24, 0), tuple(LABELS), examples(PUBLIC[:160]), "cpu", False
    )
    training = TrainingConfig(epochs=20, batch_size=32, max_length=24, progress=False)
    defense = SplitNDenoise(eta=100.0, public_examples=160, denoiser_epochs=8)
    release, report = defense.fit(target, examples(ROWS[:120]), training, seed=0)
    util = release.evaluate_utility(examples(ROWS[120:240]))
    cos = {k: v["cosine_to_clean"] for k, v in util["variants"].items()}
    assert set(cos) == {"user", "server", "none", "local-only"}
    assert cos["user"]["ci_low"] > cos["none"]["ci_high"], cos
    assert cos["user"]["value"] > cos["server"]["value"], cos
    assert util["cosine_paired_differences"]["user - server"]["ci_low"] > 0
    assert util["released_variant"] == "user" and 0 <= util["value"] <= 1
    assert report.info["eta_group"] == 0 and len(report.info["denoiser_train_etas"]) == 2
    # surfaces: probabilities, loss, the server output and the uploaded token embeddings
    texts = [r["text"] for r in ROWS[300:305]]
    p = release.probabilities(texts)
    assert p.shape == (5, len(LABELS)) and np.allclose(p.sum(1), 1)
    assert release.hidden(texts).shape == (5, 384)
    rows, ids = release.token_hidden(texts), release.token_ids(texts)
    assert all(r.shape == (len(i), 384) for r, i in zip(rows, ids, strict=True))
    assert max(np.linalg.norm(r, axis=1).max() for r in rows) <= report.info["clip_norm_C"]
    attr = run_leakage_attack(
        AttributeInference(n_aux=160, max_iter=50),
        release,
        AttackContext(examples(ROWS[:60]), examples(ROWS[240:300]), examples(PUBLIC[:160])),
    )
    assert attr.status == "ok", attr.reason
    assert "majority_accuracy_baseline" in attr.metrics


def test_claim_states_eta_metric_unit_and_implied_epsilon():
    d = SplitNDenoise(eta=50.0)
    c = d.claim(50.0, 1.5)
    assert (c.unit, c.notion, c.proven) == ("token", "metric-dp", True)
    assert c.epsilon == pytest.approx(150.0) and c.details["eta"] == 50.0
    assert "L2" in c.details["metric"]
    ref = SplitNDenoise(eta=50.0, variant="reference-code").claim(50.0, 1.5)
    assert ref.notion == "none" and not ref.proven and "NOT" in ref.note


def test_tiny_target_release_contract():
    """On the tiny BERT target: noisy − noise = clean exactly, norms ≤ C, the surfaces."""
    target = Target(
        TargetSpec("tiny", None, 16, 0), tuple(LABELS), examples(PUBLIC[:40]), "cpu", False
    )
    training = TrainingConfig(epochs=2, batch_size=16, max_length=16, progress=False)
    defense = SplitNDenoise(
        eta=5.0, clip_norm=2.0, public_examples=40, denoiser_epochs=1, eta_grouping=False
    )
    release, _ = defense.fit(target, examples(ROWS[:40]), training, seed=1)
    assert release.surfaces >= {Surface.TOKEN_HIDDEN, Surface.HIDDEN, Surface.PROBABILITIES}
    texts = [r["text"] for r in ROWS[50:54]]
    batch = release._tokens(texts)
    clean = release.pipeline.split.local_embed(batch["ids"])
    m = batch["mask"]
    assert np.linalg.norm(batch["xt"][m].astype(np.float64), axis=1).max() <= 2.0
    recomputed = batch["xt"][m].astype(np.float64) - (
        batch["xt"][m].astype(np.float64) - clean[m].astype(np.float64)
    )
    assert np.array_equal(recomputed, clean[m].astype(np.float64))
    assert release.loss(texts, np.zeros(4, dtype=int)).shape == (4,)
    assert release.claim.epsilon == pytest.approx(5.0 * 2 * 2.0)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"eta": 0}, "eta must be a positive"),
        ({"eta": -3.0}, "eta must be a positive"),
        ({"clip_norm": 0}, "clip norm C must be a positive"),
        ({"clip_norm": -1.0}, "clip norm C must be a positive"),
        ({"clip_norm": "huge"}, "clip_norm must be a positive number or 'vocab-max'"),
        ({"pooling": "max"}, "pooling must be one of"),
        ({"variant": "ball"}, "variant must be one of"),
    ],
)
def test_bad_parameters_give_one_clear_error(params, message):
    with pytest.raises(ValueError, match=message):
        SplitNDenoise(**params)


def test_config_turns_bad_eta_into_config_error(tmp_path):
    from privacy_audit.audit.config import load_config

    cfg = tmp_path / "c.toml"
    cfg.write_text('[[defenses]]\nname = "split-n-denoise"\neta = -1.0\n')
    with pytest.raises(ConfigError, match="eta must be a positive"):
        load_config(cfg)


@pytest.mark.parametrize("bad", ["eta = 0.0", "eta = -5", "clip_norm = 0.0", "clip_norm = -1"])
def test_cli_bad_eta_or_clip_exits_2_with_one_line(tmp_path, capsys, bad):
    from privacy_audit.audit.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[defenses]]\nname = "split-n-denoise"\n{bad}\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be a positive" in err[0]


def test_denoiser_dimension_mismatch_and_empty_batch(minilm_split):
    den = Denoiser(128, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="denoiser dimension mismatch"):
        den(torch.zeros(2, 384), torch.zeros(2, 3, 384), torch.zeros(2, 3, 384), mask)
    with pytest.raises(ValueError, match="empty batch"):
        minilm_split.tokenize([])
    with pytest.raises(ValueError, match="dimension 128, the model expects 384"):
        minilm_split.server_forward(np.zeros((1, 3, 128), np.float32), np.ones((1, 3), bool))


def test_bench_reports_client_cost_as_ratio_to_server(tmp_path):
    import json

    from privacy_audit.audit.cli import main

    out = tmp_path / "bench.json"
    argv = ["bench", "split-n-denoise", "--quick", "--repeats", "1", "--warmup", "0"]
    assert main([*argv, "--out", str(out)]) == 0
    (res,) = json.loads(out.read_text())["benchmarks"]
    assert res["reference"] == "server-forward" and res["ratios"]["server-forward"] == 1.0
    assert {"client-noise", "client-denoiser", "client-total"} <= set(res["ratios"])
    assert all(r > 0 for r in res["ratios"].values())
