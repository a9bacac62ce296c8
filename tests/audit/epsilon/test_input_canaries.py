"""Input-space canaries: unique, unseen, inserted with probability 1/2, deterministic."""

import re

import numpy as np
import pytest
import torch

from privacy_audit import fixtures
from privacy_audit.audit.epsilon.input_canaries import CANARY_KINDS, make_canaries, with_canaries
from privacy_audit.defenses.base import Examples

CORPUS = [r["text"] for r in fixtures.load_corpus("private")[:500]]


@pytest.mark.parametrize("kind", CANARY_KINDS)
def test_canaries_are_unique_unseen_and_half_included(kind):
    c = make_canaries(400, kind, 4, CORPUS, seed=0)
    texts = c.examples.texts
    assert len(set(texts)) == 400 and not set(texts) & set(CORPUS)
    assert set(np.unique(c.examples.labels)) <= {0, 1, 2, 3}
    assert set(np.unique(c.included)) == {0, 1}
    assert 160 <= c.included.sum() <= 240  # Bin(400, 1/2): mean 200, sd 10
    assert all(i.startswith("canary-") for i in c.examples.ids)


def test_pii_canaries_look_like_pii_and_random_token_canaries_use_corpus_words():
    pii = make_canaries(20, "pii", 4, CORPUS, seed=1)
    assert all(
        re.search(r"555-01\d\d-\d{4}", t) and "@canary-mail.test" in t for t in pii.examples.texts
    )
    words = {w for t in CORPUS for w in re.findall(r"[a-z]+", t.lower())}
    tok = make_canaries(20, "random-token", 4, CORPUS, seed=1)
    assert all(len(t.split()) == 12 and set(t.split()) <= words for t in tok.examples.texts)


def test_canaries_are_deterministic_per_seed():
    a = make_canaries(50, "random-token", 4, CORPUS, seed=3)
    b = make_canaries(50, "random-token", 4, CORPUS, seed=3)
    c = make_canaries(50, "random-token", 4, CORPUS, seed=4)
    assert a.examples.texts == b.examples.texts and np.array_equal(a.included, b.included)
    assert a.examples.texts != c.examples.texts


def test_with_canaries_appends_exactly_the_included_ones():
    c = make_canaries(30, "pii", 4, CORPUS, seed=0)
    train = Examples(["m1", "m2"], ["a", "b"], np.array([0, 1]))
    merged = with_canaries(train, c)
    assert merged.ids[:2] == ["m1", "m2"]
    assert merged.ids[2:] == [i for i, inc in zip(c.examples.ids, c.included, strict=True) if inc]
    assert len(merged) == 2 + int(c.included.sum())


def test_bad_canary_requests_are_errors():
    with pytest.raises(ValueError, match="unknown canary kind"):
        make_canaries(10, "emoji", 4, CORPUS, seed=0)
    with pytest.raises(ValueError, match="at least 2"):
        make_canaries(1, "pii", 4, CORPUS, seed=0)
    with pytest.raises(ValueError, match="too few distinct words"):
        make_canaries(10, "random-token", 4, ["a b"], seed=0)


# --------------------------------------------------------------------------- #
# LM canary designs (audit/epsilon/lm_canaries.py)
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def lm():
    from privacy_audit.targets.lm import build_lm_target

    return build_lm_target("tiny-gpt2-word", 0)


@pytest.mark.parametrize(
    "design", ["random-token", "new-token", "search-token", "bigram", "synthetic"]
)
def test_lm_designs_prefix_secret_unique_half_included(lm, design):
    from privacy_audit.audit.epsilon.lm_canaries import TokenView, make_lm_canaries, secret_span

    model, tok = lm
    n = 40 if design in ("search-token", "synthetic") else 200
    c = make_lm_canaries(n, design, tok, texts=CORPUS, base_model=model, seed=0, secret_tokens=6)
    view = TokenView(tok)
    assert len(set(c.examples.texts)) == n and c.prefixes is not None
    assert 0.3 * n <= c.included.sum() <= 0.7 * n
    for p, t in zip(c.prefixes, c.examples.texts, strict=True):
        a, b = secret_span(view, p, t)
        assert t.startswith(p) and a == len(view.ids(p)) == 4 and b - a == 6
        assert tok.unk_id not in view.ids(p)
    again = make_lm_canaries(
        n, design, tok, texts=CORPUS, base_model=model, seed=0, secret_tokens=6
    )
    assert again.examples.texts == c.examples.texts and np.array_equal(again.included, c.included)


def test_new_token_canaries_extend_vocab_and_embedding(lm):
    from privacy_audit.audit.epsilon.lm_canaries import extend_builtin, make_lm_canaries

    model, tok = lm
    c = make_lm_canaries(30, "new-token", tok, texts=CORPUS, seed=1, secret_tokens=3)
    assert len(c.new_tokens) == 90 and not set(c.new_tokens) & set(tok.vocab)
    import copy

    m2, t2 = extend_builtin(copy.deepcopy(model), tok, c.new_tokens)
    assert t2.vocab_size == tok.vocab_size + 90
    assert m2.get_input_embeddings().weight.shape[0] == t2.vocab_size
    secret_ids = t2.token_ids(c.examples.texts[0])[-3:]
    assert all(i >= tok.vocab_size for i in secret_ids)  # each secret token is a new one


def test_search_token_picks_unlikely_tokens_and_bigram_follows_the_text(lm):
    from privacy_audit.audit.epsilon.lm_canaries import TokenView, make_lm_canaries

    model, tok = lm
    view = TokenView(tok)
    s = make_lm_canaries(20, "search-token", tok, texts=CORPUS, base_model=model, seed=2)
    r = make_lm_canaries(20, "random-token", tok, texts=CORPUS, base_model=model, seed=2)

    def secret_logp(cs):
        ids, mask = tok.encode(cs.examples.texts, 64, add_eos=False)
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1], -1)
        lp = logp.gather(-1, ids[:, 1:, None])[..., 0]
        return float(lp[:, 4:].mean())  # after <bos> + 4 prefix tokens

    assert secret_logp(s) < secret_logp(r)  # least likely under the model before training
    pairs = {
        (a, b)
        for t in CORPUS
        for ids in [view.ids(t)]
        for a, b in zip(ids[:-1], ids[1:], strict=False)
    }
    b = make_lm_canaries(20, "bigram", tok, texts=CORPUS, seed=3)
    for p, t in zip(b.prefixes, b.examples.texts, strict=True):
        sec = view.ids(t)[len(view.ids(p)) :]
        assert sum((x, y) in pairs for x, y in zip(sec[:-1], sec[1:], strict=True)) >= len(sec) - 2


def test_repeat_inserts_copies():
    from privacy_audit.audit.epsilon.lm_canaries import make_lm_canaries
    from privacy_audit.targets.lm import build_tokenizer

    c = make_lm_canaries(
        30, "random-token", build_tokenizer("word"), texts=CORPUS, seed=0, repeat=3
    )
    merged = with_canaries(Examples(["m"], ["a"], np.array([0])), c)
    assert len(merged) == 1 + 3 * int(c.included.sum())


def test_bad_lm_design_requests_are_errors(lm):
    from privacy_audit.audit.epsilon.lm_canaries import make_lm_canaries

    model, tok = lm
    with pytest.raises(ValueError, match="unknown LM canary design"):
        make_lm_canaries(10, "emoji", tok)
    with pytest.raises(ValueError, match="need a base model"):
        make_lm_canaries(10, "synthetic", tok, texts=CORPUS)
    with pytest.raises(ValueError, match="need training text"):
        make_lm_canaries(10, "bigram", tok)
