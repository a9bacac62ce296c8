"""Designed canaries for causal language models, and their secret-part scores.

Designs (Panda, Tang, Nasr, Choquette-Choo & Mittal, "Privacy Auditing of Large Language
Models", ICLR 2025, §3; synthetic: Mitchell & Andrew 2026). Every canary is a *prefix*
(the first ``prefix_tokens`` tokens of a random training text, or random vocabulary tokens
when no text is given) followed by a *secret* of ``secret_tokens`` tokens:

- ``random-token``: secret tokens uniform over the vocabulary (the paper's baseline);
- ``new-token``: secret tokens added to the vocabulary for this audit, unique to each
  canary, so nothing else in training moves their embeddings: a present canary's
  secret becomes likely, an absent one's stays at its initial, unlikely value;
- ``search-token``: greedily, at each secret position, the token the model *before
  training* finds least likely after the canary so far (among a random candidate pool of
  ``search_pool`` tokens, so canaries differ);
- ``bigram``: sampled from a bigram model of the training text (model-free);
- ``synthetic``: sampled from a base model at high temperature (``temperature``) after
  the prefix.

The score of a canary is the mean log-probability of its secret tokens given the prefix
(higher = member); the prefix is never scored. Canaries may be repeated ``repeat`` times
in training; the one-run bound then uses group privacy (``privacy_audit.stats.canary_bounds``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from privacy_audit.audit.epsilon.input_canaries import LM_CANARY_DESIGNS, CanarySet
from privacy_audit.defenses.base import Examples
from privacy_audit.ground.errors import AuditError

_NEW_TOKEN_LETTERS = "bcdfghjklmnpqrstvwxz"


# --------------------------------------------------------------------------- #
# tokenizer view: the suite's word/char LMTokenizer or a Hugging Face tokenizer
# --------------------------------------------------------------------------- #
class TokenView:
    """Token ids <-> text for canary construction, whatever the tokenizer."""

    def __init__(self, tokenizer) -> None:
        lead = None
        if getattr(tokenizer, "kind", None) == "hf":  # the suite's wrapper of a user's LM
            lead = list(tokenizer.prefix)  # the ids its encoding puts before a text
            tokenizer = tokenizer.hf
        self.tok = tokenizer
        self.builtin = hasattr(tokenizer, "index") and hasattr(tokenizer, "kind")
        if lead is None and self.builtin:
            lead = [tokenizer.bos_id]  # the suite's LMs: <bos> tokens <eos>
        elif lead is None:  # a Hugging Face tokenizer: as tokenizer(text) encodes
            from privacy_audit.targets.scoring import HFTokenizer

            try:
                lead = list(HFTokenizer(tokenizer).prefix)
            except ValueError:  # no EOS / pad token: read what tokenizer(text) adds in front
                own = tokenizer("a")["input_ids"]
                plain = tokenizer("a", add_special_tokens=False)["input_ids"]
                lead = list(own[: len(own) - len(plain)]) if own[-len(plain) :] == plain else []
        #: ids before a text's own tokens in the model's encoding (none: GPT-2, Pythia)
        self.lead = lead

    def aligned(self, log_probs) -> np.ndarray:
        """Scored log-probs indexed by the text's own token positions: entry j is
        log p(token j | what precedes it); NaN where a token is not predicted (the first
        one when nothing precedes it)."""
        lp = np.asarray(log_probs, dtype=np.float64)
        if not self.lead:
            return np.concatenate([[np.nan], lp])
        return lp[len(self.lead) - 1 :]

    @property
    def sep(self) -> str:
        return "" if self.builtin and self.tok.kind == "char" else " "

    def special(self) -> set[int]:
        return set(range(4)) if self.builtin else set(self.tok.all_special_ids)

    def candidates(self) -> np.ndarray:
        """Ids usable in a secret: not special; word tokenizers: words only."""
        if self.builtin:
            vocab = self.tok.vocab
            if self.tok.kind == "word":
                return np.array([i for i in range(4, len(vocab)) if vocab[i].isalpha()])
            return np.array([i for i in range(4, len(vocab)) if vocab[i].isalnum()])
        special = set(self.tok.all_special_ids)
        n = len(self.tok)
        keep = []
        for i in range(n):
            if i in special:
                continue
            t = self.tok.decode([i])
            if t.strip() and t.strip().isalnum():
                keep.append(i)
        return np.array(keep)

    def text(self, ids) -> str:
        if self.builtin:
            return self.sep.join(self.tok.vocab[int(i)] for i in ids)
        return self.tok.decode([int(i) for i in ids]).strip()

    def ids(self, text: str) -> list[int]:
        if self.builtin:
            return self.tok.token_ids(text)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def join(self, prefix: str, secret: str) -> str:
        return f"{prefix}{self.sep}{secret}" if prefix else secret


def secret_span(view: TokenView, prefix: str, text: str) -> tuple[int, int]:
    """``(start, stop)`` of the secret's token positions in ``text``'s token ids: after the
    longest common prefix of ids(prefix) and ids(text) (robust to BPE merges)."""
    full, pre = view.ids(text), view.ids(prefix) if prefix else []
    k = 0
    while k < min(len(full), len(pre)) and full[k] == pre[k]:
        k += 1
    return k, len(full)


# --------------------------------------------------------------------------- #
# designs
# --------------------------------------------------------------------------- #
def _prefixes(view, texts, n, prefix_tokens, cand, rng) -> list[str]:
    special = view.special()
    heads = [view.ids(t)[:prefix_tokens] for t in texts or []]
    pool = [h for h in heads if len(h) == prefix_tokens and not set(h) & special]
    out = []
    for _ in range(n):
        if pool:
            ids = pool[int(rng.integers(len(pool)))]
        else:
            ids = rng.choice(cand, size=prefix_tokens)
        out.append(view.text(ids))
    return out


def _bigram_secrets(view, texts, n, length, cand, rng) -> list[list[int]]:
    seqs = [view.ids(t) for t in texts or []]
    seqs = [s for s in seqs if len(s) >= 2]
    if not seqs:
        raise ValueError("bigram canaries need training text (at least one text of 2+ tokens)")
    allowed = set(int(c) for c in cand)
    follow: dict[int, list[int]] = {}
    unigram: list[int] = []
    for s in seqs:
        for a, b in zip(s[:-1], s[1:], strict=True):
            if b in allowed:
                follow.setdefault(a, []).append(b)
        unigram.extend(t for t in s if t in allowed)
    if not unigram:
        raise ValueError("the training text has no tokens usable in a bigram canary")
    out = []
    for _ in range(n):
        tok = unigram[int(rng.integers(len(unigram)))]
        secret = [tok]
        while len(secret) < length:
            nxt = follow.get(tok)
            tok = (nxt or unigram)[int(rng.integers(len(nxt or unigram)))]
            secret.append(tok)
        out.append(secret)
    return out


def _model_ids(view: TokenView, prefix: str) -> list[int]:
    ids = [*view.lead, *view.ids(prefix)]
    if not ids:
        raise ValueError("a canary without a prefix needs a tokenizer that adds a BOS token")
    return ids


@torch.no_grad()
def _next_logits(model, ids_batch: list[list[int]]) -> torch.Tensor:
    """Next-token logits after each (unpadded, equal-length) id list."""
    x = torch.tensor(ids_batch, dtype=torch.long)
    return model(input_ids=x).logits[:, -1].double()


@torch.no_grad()
def _search_secrets(view, model, prefixes, length, cand, pool, rng) -> list[list[int]]:
    model.eval()
    out = []
    for p in prefixes:
        ctx = _model_ids(view, p)
        secret: list[int] = []
        for _ in range(length):
            logp = torch.log_softmax(_next_logits(model, [ctx + secret])[0], -1)
            options = rng.choice(cand, size=min(pool, cand.size), replace=False)
            secret.append(int(options[int(torch.argmin(logp[torch.as_tensor(options)]))]))
        out.append(secret)
    return out


@torch.no_grad()
def _synthetic_secrets(view, model, prefixes, length, cand, temperature, seed) -> list[list[int]]:
    model.eval()
    gen = torch.Generator().manual_seed(int(seed))
    allowed = torch.as_tensor(cand)
    out = []
    for p in prefixes:
        ctx = _model_ids(view, p)
        secret: list[int] = []
        for _ in range(length):
            logits = _next_logits(model, [ctx + secret])[0][allowed] / temperature
            k = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
            secret.append(int(allowed[k]))
        out.append(secret)
    return out


def _new_token_names(n: int, existing: set[str], rng) -> list[str]:
    names: list[str] = []
    seen = set(existing)
    while len(names) < n:
        w = "zq" + "".join(rng.choice(list(_NEW_TOKEN_LETTERS), size=6))
        if w not in seen:
            seen.add(w)
            names.append(w)
    return names


def make_lm_canaries(
    n: int,
    design: str,
    tokenizer,
    texts: list[str] | None = None,
    base_model=None,
    seed: int = 0,
    secret_tokens: int = 8,
    prefix_tokens: int = 4,
    repeat: int = 1,
    temperature: float = 2.0,
    search_pool: int = 256,
) -> CanarySet:
    """``n`` canaries of ``design``, each included independently with probability 1/2.

    ``tokenizer``: the suite's LMTokenizer or a Hugging Face tokenizer (for ``new-token``
    its vocabulary is *not* changed here; see :func:`extend_builtin` / the CLI).
    ``texts``: training text (prefixes; the bigram model). ``base_model``: the model
    before training (``search-token``, ``synthetic``). Deterministic per seed."""
    if design not in LM_CANARY_DESIGNS:
        raise ValueError(
            f"unknown LM canary design {design!r}; allowed: {', '.join(LM_CANARY_DESIGNS)}"
        )
    if n < 2:
        raise ValueError(f"need at least 2 canaries, got {n}")
    if repeat < 1 or secret_tokens < 1 or prefix_tokens < 0:
        raise ValueError("repeat and secret_tokens must be >= 1, prefix_tokens >= 0")
    if design in ("search-token", "synthetic") and base_model is None:
        raise ValueError(f"{design} canaries need a base model (the model before training)")
    rng = np.random.default_rng([seed, 0xCA7B, LM_CANARY_DESIGNS.index(design)])
    view = TokenView(tokenizer)
    cand = view.candidates()
    if cand.size < 20:
        raise ValueError("the tokenizer has too few usable tokens for canaries")
    prefixes = _prefixes(view, texts, n, prefix_tokens, cand, rng)
    new_tokens: tuple[str, ...] = ()
    if design == "random-token":
        secrets = [view.text(rng.choice(cand, size=secret_tokens)) for _ in range(n)]
    elif design == "new-token":
        vocab = set(view.tok.vocab) if view.builtin else set(view.tok.get_vocab())
        names = _new_token_names(n * secret_tokens, vocab, rng)
        new_tokens = tuple(names)
        secrets = [" ".join(names[i * secret_tokens : (i + 1) * secret_tokens]) for i in range(n)]
    elif design == "bigram":
        secrets = [view.text(s) for s in _bigram_secrets(view, texts, n, secret_tokens, cand, rng)]
    elif design == "search-token":
        ids = _search_secrets(view, base_model, prefixes, secret_tokens, cand, search_pool, rng)
        secrets = [view.text(s) for s in ids]
    else:
        ids = _synthetic_secrets(
            view, base_model, prefixes, secret_tokens, cand, temperature, rng.integers(2**31)
        )
        secrets = [view.text(s) for s in ids]
    full = [view.join(p, s) for p, s in zip(prefixes, secrets, strict=True)]
    included = rng.integers(0, 2, size=n).astype(np.int64)
    ids = [f"canary-{i:05d}" for i in range(n)]
    return CanarySet(
        Examples(ids, full, np.zeros(n, dtype=np.int64)),
        included,
        design,
        prefixes=prefixes,
        repeat=int(repeat),
        new_tokens=new_tokens,
    )


# --------------------------------------------------------------------------- #
# new-token canaries in the built-in trainers
# --------------------------------------------------------------------------- #
NEW_TOKEN_INITS = ("random", "mean")


def _init_new_rows(model, n_new: int, seed: int, init: str = "random") -> None:
    """Set the ``n_new`` last rows of the input embedding (and of an untied head).

    - ``random`` (default): N(0, initializer_range²), GPT-2's own embedding init, from a
      generator seeded by ``seed``;
    - ``mean``: every new row is the mean of the existing rows, which is what Hugging
      Face's ``resize_token_embeddings`` does by default (``mean_resizing=True``: the mean
      plus noise of covariance 1e-9 × the rows' covariance), without that noise. All new
      tokens then start identical. On the bundled lm audit at ε = 8 it did not measurably
      raise the black-box bound (docs/lm-canaries.md), so it is not the default.

    Never the global RNG (``resize_token_embeddings(mean_resizing=False)``), whose state
    after a cached build is not reproducible: the reference score (the model before
    training, :func:`reference_secret_scores`) needs the training run's exact init."""
    if init not in NEW_TOKEN_INITS:
        raise ValueError(f"unknown new-token init {init!r}; allowed: {', '.join(NEW_TOKEN_INITS)}")
    std = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + 0xCA7)
    mats = {}
    for emb in (model.get_input_embeddings(), model.get_output_embeddings()):
        if emb is not None:
            mats[id(emb.weight)] = emb.weight  # a tied head is the same tensor: set once
    with torch.no_grad():
        for w in mats.values():
            if init == "mean":
                rows = w[:-n_new].double().mean(0).expand(n_new, -1)
            else:
                rows = torch.randn(n_new, w.shape[1], generator=gen, dtype=torch.float64) * std
            w[-n_new:] = rows.to(dtype=w.dtype, device=w.device)


def extend_builtin(model, tokenizer, new_tokens, seed: int = 0, init: str = "random"):
    """The suite's (model, tokenizer) with ``new_tokens`` appended to the vocabulary and
    the embedding (and untied head) resized; new rows are set by :func:`_init_new_rows`
    (``init``: the mean of the existing rows, or a draw seeded by ``seed``), so the model
    before training is reproducible. Works for the word-level LMTokenizer and for a user's
    base LM (``HFTokenizer``)."""
    from privacy_audit.targets.lm import LMTokenizer

    if not new_tokens:
        return model, tokenizer
    if getattr(tokenizer, "kind", None) == "hf":  # a user's base LM (privacy_audit.targets)
        from privacy_audit.targets.scoring import HFTokenizer

        tokenizer.hf.add_tokens(list(new_tokens))
        model.resize_token_embeddings(len(tokenizer.hf), mean_resizing=False)
        _init_new_rows(model, len(new_tokens), seed, init)
        return model, HFTokenizer(tokenizer.hf, tokenizer.add_bos_option, tokenizer.add_eos)
    bad = [t for t in new_tokens if not re.fullmatch(r"[a-z]+", t)]
    if bad or tokenizer.kind != "word":
        raise ValueError("new tokens need a word-level tokenizer and lowercase letter tokens")
    tok = LMTokenizer(tokenizer.vocab[4:] + list(new_tokens), "word")
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    _init_new_rows(model, len(new_tokens), seed, init)
    return model, tok


class CanaryTarget:
    """A target whose ``build`` also adds the canaries' new tokens (``new-token``)."""

    def __init__(self, target, new_tokens, init: str = "random"):
        self._t = target
        self.new_tokens = tuple(new_tokens)
        self.init = init

    def __getattr__(self, name):
        return getattr(self._t, name)

    def build(self, seed: int):
        model, tokenizer = self._t.build(seed)
        return extend_builtin(model, tokenizer, self.new_tokens, seed, self.init)


# --------------------------------------------------------------------------- #
# scoring: mean log-probability of the secret tokens
# --------------------------------------------------------------------------- #
def canary_spans(view: TokenView, canaries: CanarySet) -> list[tuple[int, int]]:
    prefixes = canaries.prefixes or [""] * len(canaries.examples.texts)
    return [secret_span(view, p, t) for p, t in zip(prefixes, canaries.examples.texts, strict=True)]


def _mean_over(log_probs: list[np.ndarray], spans) -> np.ndarray:
    out = np.empty(len(spans))
    for i, (lp, (a, b)) in enumerate(zip(log_probs, spans, strict=True)):
        seg = np.asarray(lp[a:b], dtype=np.float64)
        if seg.size == 0 or b > len(lp):
            raise ValueError(
                f"canary {i}: its secret is empty or truncated by the model's context length"
            )
        out[i] = float(seg.mean())
    return out


def release_secret_scores(release, canaries: CanarySet) -> np.ndarray:
    """Scores of a suite release with ``token_stats`` (log-probs over ``tokens + <eos>``)."""
    view = TokenView(release.tokenizer)
    stats = release.token_stats(list(canaries.examples.texts))
    return _mean_over([view.aligned(s.log_probs) for s in stats], canary_spans(view, canaries))


def reference_secret_scores(release, model, canaries: CanarySet) -> np.ndarray:
    """The same canaries' scores under ``model`` (the model before training: the target's
    init at the training seed, or the user's base model), read through the release's own
    scoring path (same tokenizer, context length and batching), so that the two scores
    differ only by the trained weights. Uses the canary texts and prefixes only: never the
    inclusion bits."""
    import copy

    ref = copy.copy(release)  # a new __dict__: the release's caches stay its own
    for key in [k for k in vars(ref) if k.endswith("_cache")]:
        del ref.__dict__[key]
    ref.model = model.to(release.device).eval()
    return release_secret_scores(ref, canaries)


def contrast_secret_scores(release, canaries: CanarySet, chunk: int = 256) -> np.ndarray:
    """New-token canaries, read from the next-token distribution (``probabilities``): at
    each secret position, log p(secret token) minus the mean log p of all the design's new
    tokens in the same context, averaged over the secret. Every new token starts from the
    same row and is pushed down alike by the training text, so the contrast removes what
    the context and that common drift do to all of them; a present canary's tokens stand
    out from the rest. Uses the canary texts and the new-token list, never the bits."""
    if not canaries.new_tokens:
        raise ValueError("the contrast score needs new-token canaries")
    view = TokenView(release.tokenizer)
    new_ids = []
    for t in canaries.new_tokens:
        ids = view.ids(t)
        if len(ids) != 1:
            raise ValueError(f"new token {t!r} is not a single token of the release's tokenizer")
        new_ids.append(ids[0])
    cols = np.asarray(new_ids)
    prefixes = canaries.prefixes or [""] * len(canaries.examples.texts)
    ctx, tgt, owner = [], [], []
    for i, (p, text) in enumerate(zip(prefixes, canaries.examples.texts, strict=True)):
        ids = view.ids(text)
        a, b = secret_span(view, p, text)
        for k in range(max(a, 1), b):
            ctx.append(view.text(ids[:k]))
            tgt.append(ids[k])
            owner.append(i)
    contrast = np.empty(len(ctx))
    for c in range(0, len(ctx), chunk):
        lp = np.log(np.clip(release.probabilities(ctx[c : c + chunk]), 1e-300, None))
        rows = np.arange(lp.shape[0])
        contrast[c : c + chunk] = lp[rows, tgt[c : c + chunk]] - lp[:, cols].mean(1)
    sums = np.bincount(owner, weights=contrast, minlength=len(prefixes))
    counts = np.bincount(owner, minlength=len(prefixes))
    if (counts == 0).any():
        raise ValueError("a canary has no scored secret position")
    return sums / counts


def calibrated_scores(after, before) -> np.ndarray:
    """Reference-calibrated canary score: ``after − before``, the change of each canary's
    secret log-probability from the model before training to the released model (higher =
    member). The per-canary offset under the initial model (for new-token canaries, their
    random initial rows) is common to the in and out cases and cancels; what remains is
    what training moved. Both arrays are per canary, in the same order."""
    a = np.asarray(after, dtype=np.float64)
    b = np.asarray(before, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-d score arrays of one length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("canary scores must be finite (before and after training)")
    return a - b


@torch.no_grad()
def hf_token_log_probs(
    model, tokenizer, texts: list[str], batch_size: int = 16
) -> list[np.ndarray]:
    """log p(token_j | tokens_<j) for each text's tokens, encoded as ``tokenizer(text)``
    encodes it (its own BOS, if any, before them); without a BOS the first token is not
    predicted (its entry is NaN)."""
    model.eval()
    view = TokenView(tokenizer)
    lead = view.lead
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    n_ctx = getattr(model.config, "n_positions", None) or getattr(
        model.config, "max_position_embeddings", 1024
    )
    out: list[np.ndarray] = []
    for i in range(0, len(texts), batch_size):
        rows = [[*lead, *view.ids(t)] for t in texts[i : i + batch_size]]
        rows = [r[:n_ctx] for r in rows]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):
            ids[j, : len(r)] = torch.tensor(r)
            mask[j, : len(r)] = 1
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.double(), -1)
        tgt = logp[:, :-1].gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1).numpy()
        for j, r in enumerate(rows):
            out.append(view.aligned(tgt[j, : len(r) - 1]))
    return out


def hf_secret_scores(model, tokenizer, canaries: CanarySet) -> np.ndarray:
    lps = hf_token_log_probs(model, tokenizer, list(canaries.examples.texts))
    return _mean_over(lps, canary_spans(TokenView(tokenizer), canaries))


def load_user_lm(model_dir: str | Path, tokenizer_dir: str | Path | None = None):
    """``(model, tokenizer)`` of a local Hugging Face causal LM directory, offline.

    The one place ``canaries make | audit`` load a user's LM: through the own-model loader
    :func:`privacy_audit.targets.loading.load_audit_target` (safe checkpoints only; weights the
    checkpoint lacks stop the audit, so random weights are never scored). ``tokenizer_dir``
    overrides the model's tokenizer (e.g. ``canaries/tokenizer`` for new-token canaries).
    A missing directory or a hub-style name is an AuditError (one line, exit 2)."""
    from transformers import AutoTokenizer

    from privacy_audit.targets.loading import load_audit_target

    try:
        loaded = load_audit_target(model_dir, "causal-lm", dtype="float32")
    except AuditError as exc:
        raise AuditError(f"--model {str(model_dir)!r}: {exc}") from None
    model, tokenizer = loaded.model, loaded.tokenizer
    if tokenizer_dir is not None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise AuditError(f"cannot load a tokenizer from {str(tokenizer_dir)!r}: {exc}") from exc
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        raise AuditError(
            f"the tokenizer has {len(tokenizer)} tokens but the model's embedding only "
            f"{model.get_input_embeddings().weight.shape[0]}: was it resized after adding the "
            "new-token canaries (model.resize_token_embeddings(len(tokenizer)))?"
        )
    return model, tokenizer
