"""Correct DP code that once looked like a violation, and broken code that once looked
consistent: each case pins the rule that now decides it (a soundness review's findings).

Correct code must never be VIOLATED; code whose privacy dp-check cannot bound soundly must
never be consistent.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from privacy_audit.audit.epsilon.dp_check import dp_check
from privacy_audit.audit.epsilon.dp_check.sampling import Trace, classify

SIG, C = 1.0, 1.0
CLAIM = {
    "epsilon": 3.0,
    "delta": 1e-5,
    "noise_multiplier": SIG,
    "max_grad_norm": C,
    "sample_rate": 0.01,
    "steps": 100,
}
ACCEPT = ("sampling", "schedule")


def clip_sum(g):
    names = list(g)
    b = g[names[0]].shape[0]
    tot = np.sqrt(sum((g[n].reshape(b, -1) ** 2).sum(1) for n in names)) if b else np.zeros(0)
    f = np.minimum(1.0, C / np.maximum(tot, 1e-12))
    return {n: (g[n] * f.reshape((b,) + (1,) * (g[n].ndim - 1))).sum(0) for n in names}


def run(fn, params=None, **kw):
    m = types.SimpleNamespace(PARAMS=params or {"w": (20,), "b": (5,)}, privatize=fn, CLAIM=CLAIM)
    return dp_check(m, budget=kw.pop("budget", 30), accept_untested=ACCEPT, **kw)


@pytest.mark.parametrize(
    "source, params",
    [
        ("numpy", None),
        ("python random", None),
        ("torch", None),
        # one-element tensors: any difference lies on a tensor's own direction, so only
        # the comparison of the random states after both runs sees the desynchronised pair
        ("python random", {"a": (1,), "b": (1,)}),
        ("numpy", {"a": (1,), "b": (1,)}),
    ],
)
def test_randomness_drawn_in_amounts_that_depend_on_the_batch_is_not_an_effect(source, params):
    """A correct step that draws once per example before its noise (a permutation of the
    batch, say), noise and draws from one generator: the two runs of a pair then draw
    different noise. Such a pair must not count as exact, whichever generator it is: an
    exact pair's μ would then hold the noise's difference (≈ 7 here, not 1/σ)."""
    import random

    def draws(k):
        if source == "numpy":
            np.random.permutation(k)
        elif source == "python random":
            random.shuffle(list(range(k)))
        else:
            torch.randperm(k)

    def noise(shape):
        if source == "numpy":
            return np.random.normal(0, SIG * C, shape)
        if source == "python random":
            flat = [random.gauss(0, SIG * C) for _ in range(int(np.prod(shape)))]
            return np.array(flat).reshape(shape)
        return torch.randn(shape, dtype=torch.float64).numpy() * SIG * C

    def fn(g):
        draws(next(iter(g.values())).shape[0] + 1)  # one draw more per example
        return {n: v + noise(v.shape) for n, v in clip_sum(g).items()}

    r = run(fn, params)
    assert r.verdict != "violated", r.summary()
    designs = r.record["sensitivity"]["designs"]
    assert any(not d["exact"] for d in designs)
    assert all(d["mu"] < 1.5 for d in designs if d["exact"]), designs


def test_noise_the_check_cannot_replay_never_makes_a_correct_step_violated():
    rng = np.random.default_rng()  # like secure_mode: no state dp-check can set

    def fn(g):
        return {n: v + rng.normal(0, SIG * C, v.shape) for n, v in clip_sum(g).items()}

    r = run(fn, budget=20)
    assert r.verdict != "violated", r.summary()
    assert not r.record["replay"]["replayed"]


def test_momentum_on_the_noisy_release_is_not_called_state_across_steps_violated():
    """An EMA of the *noisy* gradient is post-processing of correct DP-SGD: the
    state-across-steps bound's assumption (fresh noise per release) fails, so no bound."""
    state = {}

    def fn(g):
        r = {n: v + np.random.normal(0, SIG * C, v.shape) for n, v in clip_sum(g).items()}
        prev = state.get("m")
        state["m"] = {n: r[n] if prev is None else 0.9 * prev[n] + r[n] for n in r}
        return state["m"]

    r = run(fn)
    assert r.verdict == "inconclusive", r.summary()


def test_noise_broadcast_over_a_tensor_is_never_consistent():
    def fn(g):
        s = clip_sum(g)
        return {
            n: v + np.random.normal(0, SIG * C, (1,) if n == "b" else v.shape) for n, v in s.items()
        }

    r = run(fn, params={"w": (64, 16), "b": (10,)})
    assert r.verdict != "consistent", r.summary()
    assert any(f["bug_class"] == "noise: common to all coordinates" for f in r.findings)


@pytest.mark.parametrize("n,q,steps", [(20, 0.9, 1), (4, 0.5, 2)])
def test_small_poisson_traces_are_never_called_shuffled_or_fixed(n, q, steps):
    rng = np.random.default_rng(0)
    for _ in range(300):
        batches = [np.nonzero(rng.random(n) < q)[0].tolist() for _ in range(steps)]
        c = classify(Trace(n=n, epochs=[batches], epochs_wanted=1))
        assert c["scheme"] in ("poisson", "undetermined"), c


def _tiny(n=64):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g))


def _prv(s, q, t):
    from opacus.accountants import PRVAccountant

    a = PRVAccountant()
    a.history = [(s, q, t)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return a.get_epsilon(1e-5)


def test_a_frozen_batchnorm_in_eval_mode_is_consistent():
    from opacus import PrivacyEngine

    def make_private(data):
        model = nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, 3))
        for p in model[0].parameters():
            p.requires_grad_(False)
        model, opt, loader = PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1),
            data_loader=DataLoader(data, batch_size=8),
            noise_multiplier=1.0,
            max_grad_norm=1.0,
        )
        model._module[0].eval()  # pretrained statistics, never updated
        return model, opt, loader

    claim = dict(CLAIM, epsilon=_prv(1.0, 1 / 8, 8), sample_rate=1 / 8, epochs=1)
    del claim["steps"]
    m = types.SimpleNamespace(make_dataset=_tiny, make_private=make_private, CLAIM=claim)
    r = dp_check(m, budget=60)
    assert r.verdict == "consistent", r.summary()


def test_a_claim_typed_with_b_over_n_is_inconclusive_not_violated():
    """Opacus accounts q = 1/len(loader) = 1/4 for N = 100, B = 30; a CLAIM that says
    q = 0.3 disagrees with its own printed ε, but the code releases what Opacus accounted."""
    from opacus import PrivacyEngine

    def make_private(data):
        model = nn.Linear(8, 3)
        return PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=DataLoader(data, batch_size=30),
            noise_multiplier=1.0,
            max_grad_norm=1.0,
        )

    claim = {
        "epsilon": _prv(1.0, 0.25, 4),
        "delta": 1e-5,
        "noise_multiplier": 1.0,
        "max_grad_norm": 1.0,
        "sample_rate": 0.3,
        "epochs": 1,
    }
    m = types.SimpleNamespace(
        make_dataset=lambda: _tiny(100), make_private=make_private, CLAIM=claim
    )
    r = dp_check(m, budget=60)
    assert r.verdict == "inconclusive", r.summary()
    assert any("below its own parameters" in f["bug_class"] for f in r.findings)


def test_a_stand_in_dataset_uses_the_declared_rate_and_steps():
    from opacus import PrivacyEngine

    def make_private(data):
        model = nn.Linear(8, 3)
        return PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=DataLoader(data, batch_size=64),
            noise_multiplier=1.1,
            max_grad_norm=1.0,
        )

    q = 1 / 782  # the real run: N = 50,000, B = 64
    claim = {
        "epsilon": _prv(1.1, q, 3 * 782),
        "delta": 1e-5,
        "noise_multiplier": 1.1,
        "max_grad_norm": 1.0,
        "sample_rate": q,
        "epochs": 3,
        "dataset_size": 50_000,
    }
    m = types.SimpleNamespace(
        make_dataset=lambda: _tiny(1000), make_private=make_private, CLAIM=claim
    )
    r = dp_check(m, budget=60)
    assert r.verdict == "consistent", r.summary()
    assert any(f["bug_class"] == "sampling: a stand-in dataset" for f in r.findings)
    without = dict(claim)
    del without["dataset_size"]
    m2 = types.SimpleNamespace(
        make_dataset=lambda: _tiny(1000), make_private=make_private, CLAIM=without
    )
    assert dp_check(m2, budget=60).verdict == "violated"  # the stand-in's own rate, 50x


def test_tied_embeddings_are_not_a_buffer_trained_outside_the_release():
    from opacus import PrivacyEngine
    from transformers import GPT2Config, GPT2LMHeadModel

    ids = torch.randint(0, 64, (64, 12), generator=torch.Generator().manual_seed(0))

    def make_private(data):
        torch.manual_seed(0)
        cfg = GPT2Config(
            vocab_size=64,
            n_positions=12,
            n_embd=32,
            n_layer=1,
            n_head=2,
            bos_token_id=0,
            eos_token_id=0,
        )
        cfg._attn_implementation = "eager"
        model = GPT2LMHeadModel(cfg)  # tie_word_embeddings=True: lm_head is wte
        return PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=DataLoader(data, batch_size=8),
            noise_multiplier=1.0,
            max_grad_norm=1.0,
        )

    def loss_fn(model, batch):
        (x,) = batch
        b, t = x.shape
        logits = model(input_ids=x, position_ids=torch.arange(t).expand(b, t)).logits[:, :-1]
        tok = nn.functional.cross_entropy(
            logits.reshape(-1, 64), x[:, 1:].reshape(-1), reduction="none"
        )
        return tok.reshape(b, t - 1).mean(1)

    claim = dict(CLAIM, epsilon=_prv(1.0, 1 / 8, 8), sample_rate=1 / 8, epochs=1)
    del claim["steps"]
    m = types.SimpleNamespace(
        make_dataset=lambda: TensorDataset(ids),
        make_private=make_private,
        loss_fn=loss_fn,
        CLAIM=claim,
    )
    r = dp_check(m, budget=60)
    assert r.verdict != "violated", r.summary()
    assert not any(f["check"] == "outside-release" for f in r.findings), r.summary()


def test_noise_from_the_optimizers_own_generator_is_replayed(tmp_path):
    """Opacus with ``noise_generator=``: the noise comes from the optimizer's own
    generator, which dp-check replays like the global state, so add/remove pairs are exact
    (not measured by repeated draws) and the release moves by one clipped example."""
    from privacy_audit.audit.benchmarks.dp_check import setups_dir

    setups = setups_dir()
    src = (setups / "opacus_default.py").read_text(encoding="utf-8")
    src = src.replace(
        "        max_grad_norm=CLIP,\n    )",
        "        max_grad_norm=CLIP,\n        noise_generator=_own(),\n    )",
    )
    # seeded from the OS: each instance's generator starts elsewhere, so only replaying
    # its state makes two instances draw the same noise
    src += "\n\ndef _own():\n    g = torch.Generator()\n    g.seed()\n    return g\n"
    assert "noise_generator" in src
    (tmp_path / "_common.py").write_text((setups / "_common.py").read_text("utf-8"), "utf-8")
    path = tmp_path / "own_generator.py"
    path.write_text(src, encoding="utf-8")
    r = dp_check(path, budget=30)
    assert r.verdict == "consistent", r.summary()
    designs = r.record["sensitivity"]["designs"]
    exact = [d for d in designs if d["exact"]]
    assert exact and len(exact) >= len(designs) // 2, designs


def test_noise_that_uses_a_fixed_draw_by_batch_size_is_not_an_exact_pair():
    """Correct noise N(0, σ²C²) made from a fixed-size draw combined by batch size: every
    random state is the same after both runs of a pair, yet the two noises differ. Only
    the check that an exact pair's difference lies on its crafted direction sees it; taken
    as exact, the pair's μ would hold the noises' difference and call correct code
    VIOLATED."""
    rows = 64

    def fn(g):
        b = g["w"].shape[0]
        out = {}
        for n, v in clip_sum(g).items():
            z = np.random.normal(0, SIG * C, (rows,) + v.shape)
            k = min(max(b, 1), rows)
            out[n] = v + z[:k].sum(0) / np.sqrt(k)
        return out

    r = run(fn)
    assert r.verdict != "violated", r.summary()
    designs = r.record["sensitivity"]["designs"]
    assert all(d["mu"] < 1.5 for d in designs if d["exact"]), designs


def _opacus_variant(tmp_path, name: str, edit) -> object:
    from privacy_audit.audit.benchmarks.dp_check import setups_dir

    setups = setups_dir()
    src = edit((setups / "opacus_default.py").read_text(encoding="utf-8"))
    (tmp_path / "_common.py").write_text((setups / "_common.py").read_text("utf-8"), "utf-8")
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    return path


def test_many_run_audits_reseed_every_run_after_a_setup_that_seeds_itself(tmp_path):
    """A make_private that calls torch.manual_seed(0) (common in training scripts) would
    make every run of the many-run audits draw the same noise; each run is reseeded after
    its build, so the audits run (their runs are independent) instead of being refused."""

    def seeded(src):
        out = src.replace(
            "def make_private(data):\n", "def make_private(data):\n    torch.manual_seed(0)\n"
        )
        assert out != src
        return out

    r = dp_check(_opacus_variant(tmp_path, "seeded", seeded), budget=20, end_to_end=True)
    audits = r.record["end_to_end"]["audits"]
    assert audits and all("refused" not in a for a in audits), audits
    assert all(a["runs_per_side"] > 0 for a in audits), audits
    assert r.verdict != "violated", r.summary()


def _fixed_generator(src):
    out = src.replace(
        "        max_grad_norm=CLIP,\n    )",
        "        max_grad_norm=CLIP,\n        noise_generator=_fixed(),\n    )",
    )
    out += "\n\ndef _fixed():\n    g = torch.Generator()\n    g.manual_seed(1234)\n    return g\n"
    assert out != src
    return out


def test_many_run_audits_reseed_the_optimizers_own_generator(tmp_path):
    """make_private seeds its own noise generator (manual_seed(1234)): every run's
    generator is reseeded after its build, so the runs are independent and the audits
    run."""
    r = dp_check(_opacus_variant(tmp_path, "fixed", _fixed_generator), budget=20, end_to_end=True)
    audits = r.record["end_to_end"]["audits"]
    assert audits and all("refused" not in a for a in audits), audits
    assert all(a["runs_per_side"] > 0 for a in audits), audits


def test_many_run_audits_refuse_runs_that_repeat_their_noise(tmp_path, monkeypatch):
    """Noise from a generator dp-check cannot reach repeats in every run: the many-run
    audits refuse (their runs would not be independent) rather than report a bound."""
    from privacy_audit.audit.epsilon.dp_check import end_to_end as e2e

    real = e2e.many_runs
    calls = []

    def hidden(factory, *a, **k):
        # a generator the harness cannot see: restart it after dp-check's reseeding
        def build(r):
            inst = factory(r)
            for g in inst.generators():
                g.manual_seed(1234)
            return inst

        calls.append(1)
        return real(build, *a, **k)

    monkeypatch.setattr(e2e, "many_runs", hidden)
    r = dp_check(_opacus_variant(tmp_path, "fixed", _fixed_generator), budget=20, end_to_end=True)
    assert calls
    audits = r.record["end_to_end"]["audits"]
    assert audits and all("not independent" in a.get("refused", "") for a in audits), audits
