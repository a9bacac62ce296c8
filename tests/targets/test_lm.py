"""The small causal LM target (defenses/lm.py): tokenizers, tied GPT-2, released surfaces."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from privacy_audit.defenses.base import Examples, PrivacyClaim, Surface
from privacy_audit.targets.lm import (
    LMRelease,
    build_lm,
    build_lm_target,
    char_tokenizer,
    is_lm_target,
    is_tied,
    sequence_loss,
    train_lm,
    word_tokenizer,
)
from privacy_audit.targets.loading import Target, TargetSpec

TEXTS = [
    "my secret access code is 983690",
    "hello, the parcel never arrived.",
    "please refund my order!",
    "aaaa bbbb",
]


def test_char_tokenizer_round_trip_and_padding():
    tok = char_tokenizer()
    ids, mask = tok.encode(TEXTS, max_length=64)
    assert ids.shape == (4, max(map(len, TEXTS)) + 2) and mask.sum(1).tolist() == [
        len(t) + 2 for t in TEXTS
    ]
    assert (ids[:, 0] == tok.bos_id).all()
    for row, m, text in zip(ids, mask, TEXTS, strict=True):
        assert tok.decode(row[m.bool()]) == text
        assert int(row[int(m.sum()) - 1]) == tok.eos_id
    short, _ = tok.encode(TEXTS, max_length=5)
    assert short.shape[1] == 5 and tok.eos_id not in short[0].tolist()


def test_word_tokenizer_uses_public_words_and_digits():
    tok = word_tokenizer(["The parcel arrived", "refund please"])
    ids, mask = tok.encode(["the parcel 42 zebra"], 32)
    words = [tok.vocab[i] for i in ids[0, 1:-1]]
    assert words == ["the", "parcel", "4", "2", "<unk>"]
    assert tok.decode(ids[0]) == "the parcel 42 <unk>"


def test_tiny_gpt2_is_tied_and_untied_option_is_not():
    model, tok = build_lm_target("tiny-gpt2", seed=0)
    assert is_tied(model) and model.config.vocab_size == tok.vocab_size
    untied = build_lm(tok.vocab_size, seed=0, tie=False, n_embd=16, n_layer=1, n_head=1)
    assert not is_tied(untied)
    assert untied.lm_head.weight.data_ptr() != untied.transformer.wte.weight.data_ptr()


def test_sequence_loss_is_mean_over_non_padding_positions():
    tok = char_tokenizer()
    model = build_lm(tok.vocab_size, seed=1, n_embd=16, n_layer=1, n_head=2, n_positions=64)
    ids, mask = tok.encode(TEXTS, 64)
    batched = sequence_loss(model, ids, mask)
    for i, text in enumerate(TEXTS):  # each text alone, no padding at all
        one, _ = tok.encode([text], 64)
        logits = model(input_ids=one).logits[0, :-1]
        ref = torch.nn.functional.cross_entropy(logits, one[0, 1:])
        assert torch.allclose(batched[i], ref, atol=1e-5)


def test_context_length_error():
    tok = char_tokenizer()
    model = build_lm(tok.vocab_size, n_embd=16, n_layer=1, n_head=1, n_positions=8)
    ids, mask = tok.encode(TEXTS, 32)
    with pytest.raises(ValueError, match="exceed the model's context length 8"):
        sequence_loss(model, ids, mask)


def test_release_surfaces_training_and_utility():
    tok = char_tokenizer()
    model = build_lm(tok.vocab_size, seed=0, n_embd=32, n_layer=1, n_head=2, n_positions=64)
    train = TEXTS[:2] * 8
    before = LMRelease(
        build_lm(tok.vocab_size, seed=0, n_embd=32, n_layer=1, n_head=2, n_positions=64),
        tok,
        64,
        PrivacyClaim.none(),
    )
    l0 = before.loss(TEXTS[:2])
    train_lm(model, tok, train, epochs=15, batch_size=8, learning_rate=1e-2, max_length=64)
    rel = LMRelease(model, tok, 64, PrivacyClaim.none())
    assert {Surface.LOSS, Surface.PROBABILITIES, Surface.GENERATION} <= rel.surfaces
    loss = rel.loss(TEXTS)
    assert loss.shape == (4,) and (loss[:2] < l0).all() and loss[:2].max() < loss[2:].min()
    tl = rel.token_losses(TEXTS)
    assert [len(x) for x in tl] == [len(t) + 1 for t in TEXTS]
    assert np.allclose([x.mean() for x in tl], loss)
    p = rel.probabilities(TEXTS)
    assert p.shape == (4, tok.vocab_size) and np.allclose(p.sum(1), 1)
    # a memorised prefix is continued verbatim by greedy decoding
    assert rel.generate(["my secret access code is "], 6) == ["983690"]
    util = rel.evaluate_utility(Examples(["a", "b"], TEXTS[2:], np.zeros(2)), n_boot=200)
    assert util["metric"] == "perplexity" and not util["higher_is_better"]
    assert util["ci_low"] <= util["value"] <= util["ci_high"]
    assert math.isclose(util["value"], rel.perplexity(TEXTS[2:]))
    with pytest.raises(ValueError, match="exceeds the model's context length"):
        rel.generate(["x" * 60], 10)


def test_target_preset_builds_lm():
    target = Target(TargetSpec("tiny-gpt2", None, 128, 0), ("a", "b"), None, "cpu", False)
    assert is_lm_target(target) and target.is_lm
    model, tok = target.build(0)
    assert is_tied(model) and tok.kind == "char"


def test_token_statistics_match_the_explicit_distribution():
    """mu_t / sigma_t^2 of log p under p, and log p(x_t), against a hand loop over logits.

    The statistics are computed in the logits' dtype (issue 38 item 3): on a float64 model
    they equal the float64 hand loop to 1e-12; on the same model in float32 they are within
    the float32 bound of ``logit_stats`` (u (2 + log V) on log p, u = 2^-24, at this
    5-token vocabulary, which is summed in float64; the moments within the same order),
    which a float32 exp's one-ulp error already reaches."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from privacy_audit.targets.lm import token_statistics
    from privacy_audit.targets.logit_stats import U32

    torch.manual_seed(0)
    model32 = GPT2LMHeadModel(
        GPT2Config(vocab_size=5, n_embd=8, n_layer=1, n_head=2, n_positions=16)
    ).eval()
    ids = torch.tensor([[0, 3, 1, 4, 2], [0, 2, 2, 1, 1]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    lp_bound = U32 * (2 + np.log(5))
    for model, tol_lp, tol_moments in (
        (copy.deepcopy(model32).double(), 1e-12, 1e-12),
        (model32, lp_bound, 20 * U32),
    ):
        with torch.no_grad():
            stats = token_statistics(model, ids, mask)
            logits = model(input_ids=ids, attention_mask=mask).logits.double()
        assert [len(s) for s in stats] == [4, 2]
        for row, s in enumerate(stats):
            for t in range(len(s)):
                p = torch.softmax(logits[row, t], -1).numpy()
                logp = np.log(p)
                target = int(ids[row, t + 1])
                assert s.token_ids[t] == target
                assert s.top1_ids[t] == int(np.argmax(p))
                assert abs(s.log_probs[t] - logp[target]) < tol_lp
                mu = float((p * logp).sum())
                assert abs(s.mean_log_prob[t] - mu) < tol_moments
                var = float((p * (logp - mu) ** 2).sum())
                assert abs(s.var_log_prob[t] - var) < tol_moments
