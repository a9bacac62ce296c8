"""Issue 19 (items 2, 3, 5): the Ghost-Clipping baseline of the cost bench, the
Re-Attention sequential-recommendation study and the LM utility floor / public pretraining."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from privacy_audit.targets.lm import build_lm


# --------------------------------------------------------------------------- #
# item 2: Opacus Ghost Clipping
# --------------------------------------------------------------------------- #
def _batch():
    ids = torch.randint(4, 40, (5, 10), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    return ids, mask


def test_conv1d_to_linear_keeps_the_function():
    from privacy_audit.defenses.dp_engine import conv1d_to_linear

    m = build_lm(40, seed=0, n_embd=16, n_layer=1, n_head=2, n_positions=10, tie=False)
    ids, _ = _batch()
    lin = conv1d_to_linear(copy.deepcopy(m))
    assert not any(type(x).__name__ == "Conv1D" for x in lin.modules())
    with torch.no_grad():
        assert torch.allclose(m(input_ids=ids).logits, lin(input_ids=ids).logits, atol=1e-6)


def test_opacus_ghost_step_equals_explicit_clipped_update():
    """Noise 0, SGD lr 1: the ghost step's update is -(Σ clip(g_i))/B, the explicit
    per-sample engine's on the same untied model (C small, so every sample is clipped)."""
    from privacy_audit.defenses.dp_engine import DPSGDEngine, OpacusGhostStep

    m = build_lm(40, seed=0, n_embd=16, n_layer=2, n_head=2, n_positions=10, tie=False)
    ref = copy.deepcopy(m)
    ids, mask = _batch()
    sums, norms = DPSGDEngine(ref, 0.05, 0.0, 5, norms="explicit").clipped_sum(ids, mask)
    step = OpacusGhostStep(m, 0.05, 0.0, 5, learning_rate=1.0)
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    ghost_norms = step(ids, mask)
    assert torch.allclose(ghost_norms, norms, rtol=1e-4)
    ref_params = dict(ref.named_parameters())
    linear = {n for n, mod in m.named_modules() if isinstance(mod, torch.nn.Linear)}
    for name, p in m.named_parameters():
        expected = sums[ref_params[name]] / 5
        if name.rsplit(".", 1)[0] in linear and name != "lm_head.weight" and p.dim() == 2:
            expected = expected.t()  # Conv1D [in, out] -> Linear [out, in]
        assert torch.allclose(before[name] - p.detach(), expected, atol=1e-6), name


def test_opacus_ghost_refuses_a_tied_model():
    from privacy_audit.defenses.dp_engine import OpacusGhostStep

    tied = build_lm(40, seed=0, n_embd=16, n_layer=1, n_head=2, n_positions=10)
    with pytest.raises(ValueError, match="tied embedding"):
        OpacusGhostStep(tied, 1.0, 1.0, 4)


def test_cost_bench_row_carries_ghost_beside_phantom():
    from privacy_audit.audit.benchmarks.cost_of_privacy import measure_shape
    from privacy_audit.audit.benchmarks.timing import BenchSettings

    dims = {"n_embd": 16, "n_layer": 1, "n_head": 2}
    cases, ratios, memory, row = measure_shape("t", 64, 2, 6, dims, BenchSettings(1, 0, True))
    assert set(cases) == {
        f"{k} @t" for k in ("non-private", "phantom", "explicit", "ghost", "opacus")
    }
    for k in (
        "ghost_over_phantom_time",
        "ghost_time_x_nonprivate",
        "opacus_over_phantom_time",
        "phantom_time_x_nonprivate",
        "explicit_over_phantom_time",
    ):
        assert row[k] > 0 and math.isfinite(row[k])
    assert row["tied"]["ghost"] is False and row["tied"]["phantom"] is True
    assert "ghost_memory_x_nonprivate" in row and "ghost_over_phantom_memory" in row


def test_cost_bench_cpu_time_entry_rejects_bad_input(tmp_path):
    from privacy_audit.audit.benchmarks.cost_of_privacy import main

    assert main(["--out", str(tmp_path / "missing" / "x.json")]) == 2
    assert main(["--out", str(tmp_path / "x.json"), "--repeats", "0"]) == 2
    assert not (tmp_path / "x.json").exists()


# --------------------------------------------------------------------------- #
# item 3: sequential recommendation
# --------------------------------------------------------------------------- #
def test_generator_is_seeded_long_tailed_and_sequential():
    from privacy_audit.defenses.recsys import SyntheticSequences, item_frequency_summary

    g = SyntheticSequences(n_users=600, n_items=200, seq_len=12, seed=3)
    a, b = g.generate(), g.generate()
    assert np.array_equal(a, b) and a.shape == (600, 12)
    assert not np.array_equal(
        a, SyntheticSequences(n_users=600, n_items=200, seq_len=12).generate()
    )
    s = item_frequency_summary(a, 200)
    assert s["share_top_10pct_items"] > 0.4  # uniform popularity would give about 0.1
    _, _, succ = g._structure()
    follows = np.mean([a[u, t] in succ[a[u, t - 1]] for u in range(600) for t in range(1, 12)])
    assert follows > g.p_follow  # successors are followed at least p_follow of the time
    flat = SyntheticSequences(n_users=600, n_items=200, seq_len=12, p_follow=0.0, seed=3)
    f = flat.generate()
    chance = np.mean([f[u, t] in succ[f[u, t - 1]] for u in range(600) for t in range(1, 12)])
    assert chance < follows - 0.3
    with pytest.raises(ValueError, match="seq_len"):
        SyntheticSequences(seq_len=2)


def test_rank_metrics_known_answer():
    from privacy_audit.defenses.recsys import rank_metrics

    scores = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.1, 0.0]])
    m = rank_metrics(scores, np.array([2, 0, 1]), k=2)
    assert list(m["rank"]) == [1, 3, 1]  # ties rank the target below its equals
    assert list(m["hit@2"]) == [1.0, 0.0, 1.0]
    assert np.allclose(m["ndcg@2"], [1 / math.log2(3), 0.0, 1 / math.log2(3)])


def test_recsys_intervals_cover_at_their_level():
    """Simulated coverage of the per-run bootstrap (users) and across-seed t intervals."""
    from privacy_audit.defenses.recsys import bootstrap_mean_ci, t_interval

    rng = np.random.default_rng(0)
    boot = t = 0
    n_sim = 300
    for i in range(n_sim):
        x = (rng.random(200) < 0.3).astype(float)  # HIT-like Bernoulli(0.3)
        ci = bootstrap_mean_ci(x, n_boot=300, seed=i)
        boot += ci["ci_low"] <= 0.3 <= ci["ci_high"]
        y = rng.normal(0.1, 0.02, 3)
        ti = t_interval(y)
        t += ti["ci_low"] <= 0.1 <= ti["ci_high"]
    assert 0.90 <= boot / n_sim <= 0.99
    assert 0.91 <= t / n_sim <= 0.99
    assert math.isnan(t_interval([1.0])["ci_low"])


@pytest.mark.slow
def test_recsys_study_runs_and_resumes(tmp_path, monkeypatch):
    from privacy_audit.audit.benchmarks import BENCHMARKS
    from privacy_audit.audit.benchmarks import re_attention_recsys as rr

    assert (
        BENCHMARKS["re-attention-recsys"]
        == "privacy_audit.audit.benchmarks.re_attention_recsys:run"
    )
    ck = tmp_path / "ck"
    res = rr.study(rr.QUICK, ck, log=lambda s: None)
    (row,) = res["table"]
    for m in ("ndcg@10", "hit@10"):
        assert 0 <= row[f"with {m}"]["mean"] <= 1 and 0 <= row[f"without {m}"]["mean"] <= 1
    np_run = res["runs"]["non-private|None|0"]
    assert np_run["ndcg@10"]["ci_low"] <= np_run["ndcg@10"]["mean"] <= np_run["ndcg@10"]["ci_high"]
    dp = res["runs"]["phantom|8.0|0"]
    assert dp["epsilon_claimed"] <= 8.0 * 1.01 and dp["noise_multiplier"] > 0
    assert res["data_summary"]["share_top_10pct_items"] > 0.2

    def boom(*a, **k):
        raise AssertionError("resumed study retrained a finished run")

    monkeypatch.setattr(rr, "run_one", boom)
    again = rr.study(rr.QUICK, ck, log=lambda s: None)
    assert again["table"] == res["table"]


# --------------------------------------------------------------------------- #
# item 5: unigram floor, public pretraining, claim scope
# --------------------------------------------------------------------------- #
def test_unigram_perplexity_known_answer():
    from privacy_audit.defenses.lm_baselines import beats_floor, unigram_perplexity
    from privacy_audit.targets.lm import LMTokenizer

    tok = LMTokenizer(["a", "b"], "word")
    v = tok.vocab_size
    # fit "a a b": predicted tokens a, a, b, <eos>  -> counts a=2, b=1, eos=1 (total 4)
    res = unigram_perplexity(tok, ["a a b"], ["a b"], 16, n_boot=50)
    ids = tok.encode(["a"], 4)[0][0]
    a_id, eos = int(ids[1]), int(ids[2])
    b_id = tok.token_ids("b")[0]
    assert a_id != b_id and eos not in (a_id, b_id)
    p = {a_id: 3 / (4 + v), b_id: 2 / (4 + v), eos: 2 / (4 + v)}
    expected = math.exp(-(math.log(p[a_id]) + math.log(p[b_id]) + math.log(p[eos])) / 3)
    assert res["value"] == pytest.approx(expected) and res["tokens"] == 3
    assert beats_floor({"metric": "perplexity", "value": 5, "ci_high": 6}, 7.0) is True
    assert beats_floor({"metric": "perplexity", "value": 5, "ci_high": 8}, 7.0) is False
    assert beats_floor({"metric": "accuracy", "value": 0.5}, 7.0) is None
    with pytest.raises(ValueError, match="non-empty"):
        unigram_perplexity(tok, [], ["a"], 16)


def test_bundled_lm_config_pretrains_on_public_data():
    from privacy_audit.audit.config import load_config

    cfg = load_config("lm")
    assert cfg.target.public_epochs > 0


@pytest.mark.slow
def test_lm_audit_reports_unigram_floor_and_private_fine_tuning_scope():
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.runner import run_audit

    raw = {
        "seed": 0,
        "data": {"n_members": 16, "n_nonmembers": 16, "n_test": 10},
        "target": {"preset": "tiny-gpt2-word", "max_length": 24, "public_epochs": 1},
        "train": {"epochs": 1, "batch_size": 8, "learning_rate": 3e-3},
        "defenses": [
            {"name": "none"},
            {"name": "phantom-dp-sgd", "noise_multiplier": 1.0, "accountant": "rdp"},
        ],
        "attacks": {"names": ["loss"]},
        "metrics": {"bootstrap": 100},
    }
    res = run_audit(parse_config(raw), progress=False)
    floor = res["utility_floor"]
    assert floor["public_pretraining_epochs"] == 1
    assert floor["floor"] == min(
        floor["unigram_public"]["value"], floor["unigram_public_and_train"]["value"]
    )
    assert "private fine-tuning" in floor["claims_scope"]
    for run in res["runs"]:
        assert run["utility"]["unigram_floor"] == floor["floor"]
        assert isinstance(run["utility"]["beats_unigram_floor"], bool)
    # the public-only start, the floor a private fine-tuning must beat, is recorded
    start = floor["public_start"]
    assert start["metric"] == "perplexity" and start["ci_low"] < start["value"] < start["ci_high"]
    for run in res["runs"]:
        assert run["utility"]["public_start"]["value"] == start["value"]
        assert run["utility"]["beats_public_start"] == (run["utility"]["ci_high"] < start["ci_low"])
    dp = next(r for r in res["runs"] if r["defense"] == "phantom-dp-sgd")
    assert "private fine-tuning only" in dp["claim"]["note"]
    assert dp["claim"]["details"]["public_pretraining_epochs"] == 1


def test_lm_utility_summary_reads_floor_and_flags_runs(tmp_path):
    from experiments.lm_utility import main, summarise

    auc = {"auc": {"value": 0.55, "ci_low": 0.5, "ci_high": 0.6}}
    results = {
        "title": "t",
        "utility_floor": {"floor": 200.0, "claims_scope": "private fine-tuning only"},
        "runs": [
            {
                "name": "dp",
                "defense": "phantom-dp-sgd",
                "utility": {
                    "value": 50.0,
                    "ci_low": 45.0,
                    "ci_high": 55.0,
                    "n": 10,
                    "beats_unigram_floor": True,
                },
                "claim": {"epsilon": 8.0, "delta": 1e-5},
                "attacks": [{"attack": "loss", "metrics": auc}],
            }
        ],
    }
    out = summarise(results, {"value": 60.0, "ci_low": 58.0, "ci_high": 62.0})
    (row,) = out["rows"]
    assert row["beats_unigram_floor"] is True and row["below_pretrained_start"] is True
    assert row["attack_auc"]["loss"]["value"] == 0.55 and out["claims_scope"]
    with pytest.raises(ValueError, match="utility_floor"):
        summarise({"runs": []}, None)
    assert main(["--out", str(tmp_path / "no" / "x.json")]) == 2
    assert (
        main(["--results", str(tmp_path / "missing.json"), "--out", str(tmp_path / "x.json")]) == 2
    )


@pytest.mark.slow
def test_recsys_bench_entry_checkpoints_under_the_cache(tmp_path, monkeypatch):
    from privacy_audit.audit.benchmarks import re_attention_recsys as rr
    from privacy_audit.audit.benchmarks.timing import BenchSettings

    monkeypatch.setenv("PRIVACY_AUDIT_CACHE", str(tmp_path))
    res = rr.run(BenchSettings(1, 0, True)).to_dict()
    assert res["name"] == "re-attention-recsys" and res["notes"][0].startswith("eps=8")
    assert res["setup"]["study"]["table"][0]["epsilon"] == 8.0
    assert len(list((tmp_path / res["setup"]["checkpoint"].split("/")[-1]).glob("*.json"))) == 3
