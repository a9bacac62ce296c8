"""Contracts every defense adapter implements.

A defense trains (or wraps) a target model under a mechanism and returns a
:class:`ReleasedModel`: the set of *surfaces* an adversary can observe, plus the
:class:`PrivacyClaim` the mechanism makes. Attacks only ever see a ``ReleasedModel``.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np


class Surface(str, enum.Enum):
    """What an adversary can observe from a released model."""

    PROBABILITIES = "probabilities"  # class probabilities for an input
    LOSS = "loss"  # per-example loss given the true label
    HIDDEN = "hidden"  # hidden representation (what a client sends to a server)
    TOKEN_HIDDEN = "token_hidden"  # per-token representations a client sends (split inference)
    GRADIENTS = "gradients"  # the gradient update the mechanism releases for a batch
    GENERATION = "generation"  # generated continuations of a prompt

    def __str__(self) -> str:
        return self.value


class SurfaceNotAvailable(RuntimeError):
    """Raised when an attack asks a released model for a surface it does not expose."""


UNITS = ("example", "sequence", "token", "user")
NOTIONS = ("central-dp", "local-dp", "metric-dp", "none")


@dataclass(frozen=True)
class PrivacyClaim:
    """What a mechanism claims, stated so a report can never overstate it.

    ``proven`` is True only when the (ε, δ) follows from a published proof whose
    assumptions hold for this configuration *and* the accounting used a maintained
    accountant. Heuristic or unsound claims carry ``proven=False`` and a ``note``.
    """

    epsilon: float | None
    delta: float | None
    unit: str | None
    notion: str
    accountant: str | None
    proven: bool
    note: str = ""
    # Secondary, JSON-serialisable facts of the claim, e.g. {"central_epsilon": ...,
    # "eta": ..., "status": "heuristic"}; reports print them beside the main (ε, δ).
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unit is not None and self.unit not in UNITS:
            raise ValueError(f"unknown privacy unit {self.unit!r}; allowed: {', '.join(UNITS)}")
        if self.notion not in NOTIONS:
            raise ValueError(
                f"unknown privacy notion {self.notion!r}; allowed: {', '.join(NOTIONS)}"
            )

    @classmethod
    def none(cls, note: str = "No formal privacy mechanism.") -> PrivacyClaim:
        return cls(None, None, None, "none", None, False, note)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TokenStats:
    """Per-token statistics of one text under a causal LM, from a single forward pass.

    For every predicted position t (targets x_t given x_<t, padding excluded):

    - ``token_ids[t]``: the target token x_t;
    - ``log_probs[t]``: log p(x_t | x_<t);
    - ``mean_log_prob[t]``: mu_t = E_{z~p(.|x_<t)} log p(z | x_<t) = -entropy at t;
    - ``var_log_prob[t]``: sigma_t^2 = Var_{z~p(.|x_<t)} log p(z | x_<t).

    ``mean_log_prob`` / ``var_log_prob`` are what Min-K%++ needs from the full next-token
    distribution; keeping them (not the V-sized distributions) is what lets every LM signal
    share one forward pass at O(T) memory per text.
    """

    token_ids: np.ndarray
    log_probs: np.ndarray
    mean_log_prob: np.ndarray
    var_log_prob: np.ndarray
    # log P_decode(x_t | x_<t) under a product's sampling settings (temperature, top-k,
    # top-p; privacy_audit.targets.decoding) at an extraction suffix's positions, NaN elsewhere;
    # None when the pass was asked for no decoding (all NaN: the text has no such suffix)
    decoding_log_probs: np.ndarray | None = None
    # argmax_z p(z | x_<t): the model's top-1 next token at every predicted position, from
    # the same pass (the error zone of ez-mia is where it differs from x_t); None when the
    # producer did not keep it
    top1_ids: np.ndarray | None = None

    @property
    def nll(self) -> np.ndarray:
        return -self.log_probs

    def __len__(self) -> int:
        return int(self.log_probs.size)


@dataclass
class Examples:
    """A labelled set of examples for attacks: members are the positive class (1)."""

    ids: list[str]
    texts: list[str]
    labels: np.ndarray  # task label indices, int
    members: np.ndarray | None = None  # 1 = member (in training set), 0 = non-member
    # A sensitive attribute per example (attribute-inference ground truth; the fixture's
    # "region"), or None when the data has none.
    attributes: list[str] | None = None
    # The user (person) each example belongs to (``[data] group``), or None when the data
    # names none. A user's examples are one cluster: every user-level statistic resamples
    # users, never examples (stats/by_user.py).
    groups: list[str] | None = None

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64)
        n = len(self.texts)
        if len(self.ids) != n or len(self.labels) != n:
            raise ValueError("ids, texts and labels must have the same length")
        if self.attributes is not None:
            self.attributes = [str(a) for a in self.attributes]
            if len(self.attributes) != n:
                raise ValueError("attributes must have the same length as texts")
        if self.groups is not None:
            self.groups = [str(g) for g in self.groups]
            if len(self.groups) != n:
                raise ValueError("groups must have the same length as texts")
        if self.members is not None:
            self.members = np.asarray(self.members, dtype=np.int64)
            if len(self.members) != n:
                raise ValueError("members must have the same length as texts")

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, index: np.ndarray | list[int]) -> Examples:
        index = np.asarray(index, dtype=np.int64)
        return Examples(
            ids=[self.ids[i] for i in index],
            texts=[self.texts[i] for i in index],
            labels=self.labels[index],
            members=None if self.members is None else self.members[index],
            attributes=None if self.attributes is None else [self.attributes[i] for i in index],
            groups=None if self.groups is None else [self.groups[i] for i in index],
        )

    def concat(self, other: Examples) -> Examples:
        """These examples followed by ``other`` (members / attributes / groups kept only if
        both have them)."""
        both = self.members is not None and other.members is not None
        attrs = self.attributes is not None and other.attributes is not None
        grouped = self.groups is not None and other.groups is not None
        return Examples(
            ids=self.ids + other.ids,
            texts=self.texts + other.texts,
            labels=np.concatenate([self.labels, other.labels]),
            members=np.concatenate([self.members, other.members]) if both else None,
            attributes=self.attributes + other.attributes if attrs else None,
            groups=self.groups + other.groups if grouped else None,
        )


class ReleasedModel(ABC):
    """The observable side of a trained target. Subclasses implement what they expose.

    ``surfaces`` lists what is exposed; a method for a surface that is not listed raises
    :class:`SurfaceNotAvailable`. Arrays are numpy, one row per input.
    """

    surfaces: frozenset[Surface] = frozenset()
    claim: PrivacyClaim
    label_names: list[str]

    def _require(self, surface: Surface) -> None:
        if surface not in self.surfaces:
            raise SurfaceNotAvailable(f"this model does not expose {surface.value}")

    def probabilities(self, texts: list[str]) -> np.ndarray:
        """Class probabilities, shape (n, n_classes); rows sum to 1."""
        self._require(Surface.PROBABILITIES)
        raise NotImplementedError

    def loss(self, texts: list[str], labels: np.ndarray) -> np.ndarray:
        """Per-example cross-entropy loss, shape (n,)."""
        self._require(Surface.LOSS)
        raise NotImplementedError

    def hidden(self, texts: list[str]) -> np.ndarray:
        """Released hidden representation, shape (n, d)."""
        self._require(Surface.HIDDEN)
        raise NotImplementedError

    def token_hidden(self, texts: list[str]) -> list[np.ndarray]:
        """Released per-token representations: one array of shape (L_i, d) per text, one row
        per non-padding input token, in input order (aligned with :meth:`token_ids`)."""
        self._require(Surface.TOKEN_HIDDEN)
        raise NotImplementedError

    def token_ids(self, texts: list[str]) -> list[np.ndarray]:
        """The true input token ids behind :meth:`token_hidden` (ground truth for scoring a
        reconstruction; attacks must not use them to reconstruct)."""
        self._require(Surface.TOKEN_HIDDEN)
        raise NotImplementedError

    def vocabulary_embeddings(self) -> np.ndarray:
        """The public token-embedding table, shape (V, d), that an inversion adversary knows."""
        self._require(Surface.TOKEN_HIDDEN)
        raise NotImplementedError

    def decode_tokens(self, ids: np.ndarray) -> list[str]:
        """Token strings for token ids (for reports of reconstructed text)."""
        self._require(Surface.TOKEN_HIDDEN)
        raise NotImplementedError

    def gradient_update(self, texts: list[str], labels: np.ndarray, seed: int = 0) -> np.ndarray:
        """The flattened parameter update the mechanism releases for this batch, shape (P,)."""
        self._require(Surface.GRADIENTS)
        raise NotImplementedError

    def evaluate_utility(self, test: Examples) -> dict[str, Any]:
        """Utility on held-out data: ``{"metric", "value", "ci_low", "ci_high", "n",
        "higher_is_better"}``. Default: classification accuracy with an exact 95% CI;
        generative releases override it (e.g. perplexity, lower is better)."""
        from scipy.stats import binomtest

        pred = self.probabilities(test.texts).argmax(axis=1)
        k = int((pred == test.labels).sum())
        n = len(test)
        if n == 0:
            raise ValueError("the utility test set is empty")
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        return {
            "metric": "accuracy",
            "value": k / n,
            "ci_low": ci.low,
            "ci_high": ci.high,
            "n": n,
            "correct": k,
            "higher_is_better": True,
            # the trivial baseline the accuracy must clear: always predict the majority class
            "majority_rate": float(np.bincount(np.asarray(test.labels, dtype=int)).max() / n),
        }

    def generate(self, prompts: list[str], max_new_tokens: int = 32) -> list[str]:
        """Generated continuations, one per prompt."""
        self._require(Surface.GENERATION)
        raise NotImplementedError


@dataclass
class TrainingReport:
    """What training did, for the report: free-form numbers and strings."""

    info: dict[str, Any] = field(default_factory=dict)


class Defense(ABC):
    """A privacy mechanism adapter.

    ``PARAMS`` maps each config parameter to ``(type, default)``; the config loader
    validates against it, so unknown or mistyped parameters fail before any training.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    PARAMS: ClassVar[dict[str, tuple[type | tuple[type, ...], Any]]] = {}

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.PARAMS)
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {', '.join(sorted(unknown))} for defense {self.name!r}; "
                f"allowed: {', '.join(sorted(self.PARAMS)) or 'none'}"
            )
        self.params = {k: params.get(k, default) for k, (_, default) in self.PARAMS.items()}
        self.validate()

    def validate(self) -> None:  # noqa: B027 - optional hook, most defenses need no checks
        """Check parameter values; raise ValueError naming the bad one."""

    @abstractmethod
    def fit(
        self, target: Any, train: Examples, training: Any, seed: int
    ) -> tuple[ReleasedModel, TrainingReport]:
        """Train ``target`` on ``train`` under this mechanism and return what is released."""
