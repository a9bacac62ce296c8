"""Input-space canaries for one-run ε audits (Steinke, Nasr & Jagielski 2023).

Each canary is a fresh, unique training example with a random task label, so a model can
only fit it by memorising it. Every canary is inserted into the training set
independently with probability 1/2 (the one-run design); after training, each canary is
scored with the loss attack and the one-run estimator turns the guesses into a lower
bound on ε that is valid for one training run.

Kinds (whole text scored, any target):
- ``random-token``: a sequence of words drawn uniformly from the audit data's vocabulary;
- ``pii``: a PII-shaped sentence (fictional name, e-mail, phone and account number), the
  kind of record a real leak would expose.

Designs for causal LMs (Panda, Tang, Nasr, Choquette-Choo & Mittal, "Privacy Auditing of
Large Language Models", ICLR 2025; Mitchell & Andrew 2026): each canary is a short
*prefix* (the first tokens of a training text, or random vocabulary tokens) followed by a
*secret*, and only the secret's tokens are scored (mean log-probability given the
prefix), as in the paper. See :mod:`privacy_audit.audit.epsilon.lm_canaries`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from privacy_audit.defenses.base import Examples

CANARY_KINDS = ("random-token", "pii")
#: LM canary designs (audit/epsilon/lm_canaries.py); ``random-token`` there is the LM baseline.
LM_CANARY_DESIGNS = ("random-token", "new-token", "search-token", "bigram", "synthetic")
_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ren",
    "tas",
    "vo",
    "qui",
    "zel",
    "dor",
    "nim",
    "sha",
    "pe",
    "tor",
    "ul",
    "bex",
)


@dataclass
class CanarySet:
    examples: Examples  # canary texts with their (random) labels
    included: np.ndarray  # 1 = inserted into the training set
    kind: str
    # LM designs only: the prefix of each text (the rest is the scored secret), how many
    # times an included canary is inserted (the one-run group size) and new vocabulary.
    prefixes: list[str] | None = None
    repeat: int = 1
    new_tokens: tuple[str, ...] = ()
    # LM designs: the model before training (the training run's exact init, or the user's
    # base model); when set, each score is calibrated by the canary's score under it
    # (lm_canaries.calibrated_scores). Built from the seed only: it never sees the bits.
    reference: Any = None

    def inserted(self) -> Examples:
        """The included canaries, each ``repeat`` times (copies get ``#k`` id suffixes)."""
        ex = self.examples.subset(np.flatnonzero(self.included == 1))
        if self.repeat == 1:
            return ex
        return Examples(
            ids=[f"{i}#{k}" for i in ex.ids for k in range(self.repeat)],
            texts=[t for t in ex.texts for _ in range(self.repeat)],
            labels=np.repeat(ex.labels, self.repeat),
        )


def _name(rng: np.random.Generator) -> str:
    return "".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 4)))).capitalize()


def _pii_text(rng: np.random.Generator) -> str:
    first, last = _name(rng), _name(rng)
    phone = f"555-01{rng.integers(0, 100):02d}-{rng.integers(0, 10000):04d}"
    account = "".join(str(d) for d in rng.integers(0, 10, size=8))
    return (
        f"Please update the record for {first} {last}, e-mail {first.lower()}.{last.lower()}@canary-mail.test, "
        f"phone {phone}, account number {account}."
    )


def make_canaries(
    n: int, kind: str, n_labels: int, corpus_texts: list[str], seed: int
) -> CanarySet:
    """``n`` unique canaries of ``kind``, each included with probability 1/2 (seeded)."""
    if kind not in CANARY_KINDS:
        raise ValueError(f"unknown canary kind {kind!r}; allowed: {', '.join(CANARY_KINDS)}")
    if n < 2:
        raise ValueError(f"need at least 2 canaries, got {n}")
    rng = np.random.default_rng([seed, 0xCA7A])
    vocab = sorted(
        {w for t in corpus_texts for w in re.findall(r"[a-z]+", t.lower()) if len(w) > 2}
    )
    if kind == "random-token" and len(vocab) < 20:
        raise ValueError("the audit data has too few distinct words for random-token canaries")
    seen: set[str] = set(corpus_texts)
    texts: list[str] = []
    while len(texts) < n:
        text = " ".join(rng.choice(vocab, size=12)) if kind == "random-token" else _pii_text(rng)
        if text not in seen:
            seen.add(text)
            texts.append(text)
    labels = rng.integers(0, n_labels, size=n)
    included = rng.integers(0, 2, size=n)
    ids = [f"canary-{i:05d}" for i in range(n)]
    return CanarySet(Examples(ids, texts, labels), included.astype(np.int64), kind)


def with_canaries(train: Examples, canaries: CanarySet) -> Examples:
    """The training set plus the included canaries.

    When the training texts carry users (``train.groups``), every canary is a canary
    USER of its own, ``canary:<id>``, holding all its ``repeat`` copies: under a
    user-level claim a canary is then one unit (the one-run bound needs no group
    privacy), and a user-level trainer samples and clips it as one user."""
    extra = canaries.inserted()
    out = Examples(
        ids=train.ids + extra.ids,
        texts=train.texts + extra.texts,
        labels=np.concatenate([train.labels, extra.labels]),
    )
    groups = getattr(train, "groups", None)
    if groups is not None:
        out.groups = list(groups) + [f"canary:{i.split('#')[0]}" for i in extra.ids]
    return out
