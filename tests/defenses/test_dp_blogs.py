"""DP-BloGS: block shuffle, clipping, per-tensor ε, composition, accountant, training hooks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from privacy_audit.defenses.dp_blogs import (
    AccountantWarning,
    BloGSAccountant,
    BloGSGenerator,
    BloGSOptimizer,
    advanced_composition,
    block_shuffle,
    blogs_trainer_callback,
    clip_tensor,
    epsilon_block,
    epsilon_group,
    epsilon_whole,
    gpt2_small_dims,
)

pytestmark = pytest.mark.filterwarnings("ignore::privacy_audit.defenses.dp_blogs.AccountantWarning")


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- shuffle


@pytest.mark.parametrize("shape,b", [((12,), 3), ((6, 8), 4), ((4, 4, 4), 16), ((10,), 1)])
def test_shuffle_divisible_permutes_blocks(shape, b):
    g = torch.randn(shape, generator=gen(1))
    for mode in ("reference", "strict"):
        out = block_shuffle(g, b, gen(2), mode=mode)
        assert out.shape == g.shape
        rows_in = g.reshape(-1, b)
        rows_out = out.reshape(-1, b)
        # every output block is some input block, each used once
        match = (rows_out[:, None, :] == rows_in[None, :, :]).all(-1)
        assert (match.sum(1) >= 1).all()
        assert torch.equal(torch.sort(g.flatten()).values, torch.sort(out.flatten()).values)
        assert torch.isclose(out.norm(), g.norm())


def test_shuffle_actually_moves_blocks():
    g = torch.arange(64.0)
    outs = {tuple(block_shuffle(g, 8, gen(s)).tolist()) for s in range(10)}
    assert len(outs) > 5


def test_shuffle_reference_pads_and_trims_when_not_divisible():
    g = torch.arange(1.0, 11.0)
    seen_lossy = False
    for s in range(50):
        out = block_shuffle(g, 4, gen(s), mode="reference")
        n, pad = 3, 2
        flat = torch.cat([g, torch.zeros(pad)])
        perm = torch.randperm(n, generator=gen(s))
        expected = flat.view(n, 4)[perm].reshape(-1)[:10]
        assert torch.equal(out, expected)  # the reference recipe, bit for bit
        if not torch.equal(torch.sort(out).values, torch.sort(g).values):
            seen_lossy = True
            assert out.norm() < g.norm()
    assert seen_lossy  # the padded block landed mid-tensor in some draw: entries dropped
    # the note's worked example: [9,10,0,0,1..6], 7 and 8 dropped
    target = torch.tensor([9.0, 10, 0, 0, 1, 2, 3, 4, 5, 6])
    assert any(torch.equal(block_shuffle(g, 4, gen(s)), target) for s in range(50))


def test_shuffle_strict_is_a_permutation_when_not_divisible():
    g = torch.randn(10, generator=gen(3))
    for s in range(20):
        out = block_shuffle(g, 4, gen(s), mode="strict")
        assert torch.equal(torch.sort(out).values, torch.sort(g).values)
        assert torch.equal(out[8:], g[8:])  # the tail stays in place


@pytest.mark.parametrize("b", [7, 8, 100])
def test_block_size_at_least_d_is_identity(b):
    g = torch.randn(7, generator=gen(4))
    for mode in ("reference", "strict"):
        assert torch.equal(block_shuffle(g, b, gen(0), mode=mode), g)


def test_block_size_one_gives_uniform_position():
    d, draws = 10, 10_000
    g = torch.zeros(d)
    g[3] = 1.0
    generator = gen(5)
    counts = np.zeros(d)
    for _ in range(draws):
        counts[int(block_shuffle(g, 1, generator).argmax())] += 1
    assert chisquare(counts).pvalue > 1e-3
    assert counts.min() > 0.8 * draws / d


def test_shuffle_reproducible_and_independent_across_calls():
    g = torch.arange(32.0)
    a = block_shuffle(g, 4, gen(7))
    assert torch.equal(a, block_shuffle(g, 4, gen(7)))
    generator = gen(7)
    first, second = block_shuffle(g, 4, generator), block_shuffle(g, 4, generator)
    assert not torch.equal(first, second)


def test_shuffle_leaks_invariants():
    g = torch.randn(4096, generator=gen(8))
    g[g.abs() < 0.5] = 0
    out = block_shuffle(clip_tensor(g, 1.0), 8, gen(9))
    c = clip_tensor(g, 1.0)
    assert torch.isclose(out.sum(), c.sum(), atol=1e-5)
    assert torch.equal(torch.sort(out).values, torch.sort(c).values)
    assert out.abs().max() == c.abs().max()
    assert int((out != 0).sum()) == int((c != 0).sum())


def test_shuffle_is_not_unbiased():
    """The paper's Thm 2.3 (E[M(D)] = g) is false: the mean is the per-offset mean."""
    d, b, n = 12, 3, 20_000
    g = torch.arange(d, dtype=torch.float64) ** 1.5
    generator = gen(10)
    acc = torch.zeros(d, dtype=torch.float64)
    for _ in range(n):
        acc += block_shuffle(g, b, generator)
    mean = acc / n
    offset_mean = g.view(-1, b).mean(0).repeat(d // b)
    assert (mean - offset_mean).abs().max() < 0.05 * g.abs().max()
    assert (mean - g).abs().max() > 0.3 * g.abs().max()  # far from g: biased


# --------------------------------------------------------------------------- clipping


def test_clip_bound_and_commutes_with_shuffle():
    for s in range(5):
        g = torch.randn(64, generator=gen(s)) * (10 ** (s - 2))
        c = clip_tensor(g, 1.0)
        assert c.norm() <= 1.0 * (1 + 1e-6)
        if g.norm() <= 1.0:
            assert torch.equal(c, g)
        a = clip_tensor(block_shuffle(g, 8, gen(11)), 1.0)
        b = block_shuffle(clip_tensor(g, 1.0), 8, gen(11))
        assert torch.allclose(a, b)
    assert torch.equal(clip_tensor(torch.zeros(5), 1.0), torch.zeros(5))


# --------------------------------------------------------------------------- ε and composition


def test_reference_epsilon_values():
    assert epsilon_whole(768, 1.0) == pytest.approx(8.13719, rel=1e-6)
    assert epsilon_block(768, 1, 1.0) == pytest.approx(1.94878e-4, rel=1e-5)
    assert epsilon_block(768, 384, 1.0) == pytest.approx(1.87738, rel=1e-5)
    assert epsilon_block(768, 767, 1.0) == pytest.approx(3.99514, rel=1e-5)
    assert epsilon_block(4096, 8, 1.0) == pytest.approx(3.6095e-4, rel=1e-4)
    assert epsilon_block(500, 500, 0.7) == pytest.approx(4 * 0.7)


def test_per_tensor_epsilon_increases_with_block_size():
    for d in (10, 768, 4096, 2_359_296):
        bs = np.unique(np.geomspace(1, d, 40).astype(int))
        eps = [epsilon_group(d, int(b), 1.0)[2] for b in bs]
        assert np.all(np.diff(eps) > 0)
        assert eps[-1] <= epsilon_whole(d, 1.0) + 1e-12


def test_composition_is_monotone():
    base = advanced_composition(0.01, 100, 1e-5)
    assert advanced_composition(0.02, 100, 1e-5) > base
    assert advanced_composition(0.01, 200, 1e-5) > base
    assert advanced_composition(0.01, 100, 1e-3) < base
    assert math.isinf(advanced_composition(701, 1, 1e-5))
    grid = [advanced_composition(e, 50, 1e-5) for e in np.linspace(0, 5, 30)]
    assert np.all(np.diff(grid) > 0)


# --------------------------------------------------------------------------- accountant


@pytest.mark.parametrize(
    "target,expected,overshoot",
    [(0.1, 0.7526, True), (1.0, 1.0009, True), (10.0, 9.999, False), (100.0, 103.81, True)],
)
def test_gpt2_small_accountant_table(target, expected, overshoot):
    dims = gpt2_small_dims()
    assert len(dims) == 148 and sum(dims) == 124_439_808
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = BloGSAccountant(dims, target_epsilon=target, delta=1e-5, steps=100).find_block_sizes()
    assert r.epsilon == pytest.approx(expected, abs=6e-4 if expected < 20 else 0.01)
    assert r.overshoot is overshoot
    assert any("overshoot" in str(w.message) for w in caught) is overshoot
    assert all(issubclass(w.category, AccountantWarning) for w in caught)
    if target == 0.1:
        assert r.n_stuck_at_b1 == 98 and r.block_sizes[4] == 68  # c_attn.w of layer 0
        assert r.epsilon > 7 * target  # silent 7.5x overshoot in the reference
    if target == 1.0:
        assert r.n_stuck_at_b1 == 86 and r.block_sizes[0] == 29_448
    # Lemma 23: b_i / d_i is (nearly) the same wherever b_i > 1
    bs, d = np.array(r.block_sizes), np.array(dims)
    ratio = (bs / d)[bs > 1000]
    assert ratio.max() / ratio.min() < 1.01


def test_gpt2_dims_match_transformers():
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        model = GPT2LMHeadModel(GPT2Config())
    assert [p.numel() for p in model.parameters() if p.requires_grad] == gpt2_small_dims()


def test_accountant_returned_epsilon_matches_block_sizes():
    acc = BloGSAccountant([1000, 5000, 20], target_epsilon=2.0, steps=10)
    r = acc.find_block_sizes(warn=False)
    assert r.epsilon == pytest.approx(acc.total_epsilon(r.block_sizes))
    assert all(1 <= b <= d - 1 for b, d in zip(r.block_sizes, [1000, 5000, 20], strict=True))


# --------------------------------------------------------------------------- training hooks


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def test_plain_loop_with_accumulation():
    model = tiny_model()
    g = BloGSGenerator(model.named_parameters(), target_epsilon=5.0, steps=4, seed=0)
    opt = BloGSOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), g, accumulation_steps=3)
    x, y = torch.randn(12, 8, generator=gen(0)), torch.randint(0, 2, (12,), generator=gen(1))
    before = [p.detach().clone() for p in model.parameters()]
    stepped = []
    for i in range(12):
        loss = torch.nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        opt.scale(loss).backward()
        stepped.append(opt.step())
    assert stepped == [False, False, True] * 4
    assert g.steps_done == 4
    assert g.epsilon_spent == pytest.approx(g.epsilon_planned)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert [r["blocks"] for r in g.layout()] == [
        -(-p.numel() // g.block_sizes[n]) for n, p in model.named_parameters()
    ]


def test_generator_privatizes_each_tensor():
    model = tiny_model()
    g = BloGSGenerator(
        model.named_parameters(),
        clip_value=0.5,
        seed=1,
        block_sizes={n: 4 for n, _ in model.named_parameters()},
    )
    x = torch.randn(20, 8, generator=gen(2))
    (model(x) ** 2).sum().backward()
    raw = {n: p.grad.clone() for n, p in model.named_parameters()}
    g.generate()
    for n, p in model.named_parameters():
        c = clip_tensor(raw[n], 0.5)
        assert p.grad.norm() <= 0.5 * (1 + 1e-5)
        if raw[n].numel() % 4 == 0:
            assert torch.allclose(
                torch.sort(p.grad.flatten()).values, torch.sort(c.flatten()).values
            )


def test_trainer_callback_runs_blogs_before_each_step():
    import accelerate  # noqa: F401 - Trainer needs it
    from transformers import Trainer, TrainingArguments

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = tiny_model()

        def forward(self, x, labels):
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 20

        def __getitem__(self, i):
            return {"x": torch.randn(8, generator=gen(i)), "labels": torch.tensor(i % 2)}

    model = Wrapped()
    g = BloGSGenerator(model.named_parameters(), target_epsilon=5.0, steps=2, seed=0)
    cb = blogs_trainer_callback(g, max_grad_norm=1.0)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        common = dict(
            output_dir=tmp,
            per_device_train_batch_size=5,
            gradient_accumulation_steps=2,
            num_train_epochs=1,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            disable_tqdm=True,
        )
        Trainer(
            model=model,
            args=TrainingArguments(max_grad_norm=0, **common),
            train_dataset=DS(),
            callbacks=[cb],
        ).train()
        assert g.steps_done == 2
        with pytest.raises(ValueError, match="max_grad_norm=0"):
            Trainer(
                model=model,
                args=TrainingArguments(max_grad_norm=1.0, **common),
                train_dataset=DS(),
                callbacks=[cb],
            ).train()


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors():
    g = torch.randn(8)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="block size must be a positive integer"):
            block_shuffle(g, bad)
    with pytest.raises(ValueError, match="block size"):
        block_shuffle(g, 2.5)
    with pytest.raises(ValueError, match="unknown shuffle mode"):
        block_shuffle(g, 2, mode="loose")
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="clip value must be a positive"):
            clip_tensor(g, bad)
        with pytest.raises(ValueError, match="clip value must be a positive"):
            BloGSAccountant([10], clip_value=bad)
        with pytest.raises(ValueError, match="target epsilon must be a positive"):
            BloGSAccountant([10], target_epsilon=bad)
    model = tiny_model()
    blogs = BloGSGenerator(model.named_parameters(), target_epsilon=1.0, steps=1)
    opt = BloGSOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), blogs)
    assert opt.accumulation_steps == 10  # the paper's default
    with pytest.raises(ValueError, match="no gradients: call backward"):
        opt.step()
    with pytest.raises(ValueError, match="no gradients: call backward"):
        blogs.generate()  # the Trainer-callback path
    with pytest.raises(ValueError, match="accumulation_steps must be a positive integer"):
        BloGSOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), blogs, accumulation_steps=0)


def test_bench_dp_blogs_runs_side_by_side(tmp_path):
    import json

    from privacy_audit.audit.cli import main

    out = tmp_path / "bench.json"
    argv = ["bench", "dp-blogs", "--quick", "--repeats", "1", "--warmup", "0", "--out", str(out)]
    assert main(argv) == 0
    (res,) = json.loads(out.read_text())["benchmarks"]
    assert res["reference"] == "non-private" and set(res["ratios"]) == {"non-private", "dp-blogs"}
    assert res["targets"] == {"dp-blogs": "<= 1.1x"}
