"""Privacy monitoring during training: cheap membership attacks every N steps or epochs.

:class:`PrivacyMonitor` works in any PyTorch training loop: call ``monitor.step(step)``
after each optimizer step and it runs the chosen attacks when they are due.
:class:`PrivacyAuditCallback` is a ``transformers.TrainerCallback`` built on the same
monitor, which logs into ``trainer.state.log_history`` and can stop training when an
attack gets stronger than a threshold.

Each evaluation wraps the *live* model in a release (no copy of the weights): a
:class:`privacy_audit.targets.classifier.ClassifierRelease` for a classifier, a
:class:`privacy_audit.targets.scoring.HFLMRelease` for a causal LM (``*ForCausalLM`` /
``*LMHeadModel``, PEFT-wrapped or not; its attacks -- ``lm-loss``, ``zlib``, ``min-k`` by
default -- share one forward pass per text, and no labels are needed: members and
non-members may be plain lists of texts). It switches the model to eval mode, runs the attacks without gradients
through :func:`privacy_audit.attacks.base.run_attack`, and restores the model's previous mode. The
attacks see a sample of the training data (members, the positive class) and held-out
data from the same distribution (non-members). Only forward passes over those examples
and a small bootstrap are spent, and no torch random state is consumed, so training
follows the same trajectory with or without monitoring.

Logged keys, per attack ``A``: ``privacy/A/auc`` (with ``_ci_low``/``_ci_high``),
``privacy/A/tpr_at_fpr_0.01``, ``privacy/A/advantage``, ``privacy/A/epsilon_lower_bound``;
over all attacks: ``privacy/max_auc``, ``privacy/max_tpr_at_fpr_0.01``,
``privacy/max_epsilon_lower_bound``; and ``privacy/seconds`` (time the evaluation took).
``stop_if`` uses the names of ``privacy-audit gate``: ``max_auc``,
``max_tpr_at_1pct_fpr``, ``max_epsilon_lb``; a threshold is crossed when the observed
maximum is strictly above it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase, TrainerCallback

from privacy_audit.attacks import ATTACKS
from privacy_audit.attacks.base import AttackResult, MetricSettings, run_attack
from privacy_audit.audit.integrations.gate_rules import GATED
from privacy_audit.defenses.base import Examples, PrivacyClaim, Surface
from privacy_audit.targets.classifier import ClassifierRelease

__all__ = [
    "DEFAULT_MONITOR_ATTACKS",
    "THRESHOLDS",
    "PrivacyAuditCallback",
    "PrivacyMonitor",
    "monitor_attacks",
]

DEFAULT_MONITOR_ATTACKS = ("loss", "confidence")
DEFAULT_LM_MONITOR_ATTACKS = ("lm-loss", "zlib", "min-k")
MODEL_KINDS = ("auto", "classifier", "causal-lm")

#: ``stop_if`` key -> the logged aggregate it is compared with (names as in ``privacy-audit gate``).
THRESHOLDS: dict[str, str] = {key: f"privacy/max_{metric}" for key, (metric, _) in GATED.items()}

# Surfaces a forward pass yields; attacks that need more (gradients, generation) are not
# cheap enough to run during training, and the monitor runs without gradients.
_FORWARD_SURFACES = frozenset({Surface.PROBABILITIES, Surface.LOSS, Surface.HIDDEN})

# Per-attack metrics that are logged (the bootstrap CI is logged for the AUC only).
_PER_ATTACK = ("auc", "tpr_at_fpr_0.01", "advantage", "epsilon_lower_bound")


def monitor_attacks(kind: str = "classifier") -> list[str]:
    """Names from :data:`privacy_audit.attacks.ATTACKS` that the monitor can run on a ``kind`` model
    (``classifier`` or ``causal-lm``): attacks on forward-only surfaces that need no
    side model (the reference attack trains one)."""
    want = "lm" if kind == "causal-lm" else "classifier"
    return sorted(
        name
        for name, cls in ATTACKS.items()
        if cls.requires <= _FORWARD_SURFACES
        and getattr(cls, "target_kind", "classifier") == want
        and not hasattr(cls, "prepare")
        and name != "reference"
    )


def model_kind(model) -> str:
    """``causal-lm`` for ``*ForCausalLM`` / ``*LMHeadModel`` (PEFT wrappers too), else
    ``classifier``."""
    names = [type(model).__name__]
    base = getattr(model, "base_model", None)
    inner = getattr(base, "model", None)
    if inner is not None:
        names.append(type(inner).__name__)
    if any(n.endswith(("ForCausalLM", "LMHeadModel")) for n in names):
        return "causal-lm"
    return "classifier"


def _check_attacks(attacks: str | Iterable[str], kind: str = "classifier") -> tuple[str, ...]:
    names = [attacks] if isinstance(attacks, str) else list(attacks)
    allowed = monitor_attacks(kind)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ValueError(
            f"unknown attack(s) {', '.join(repr(n) for n in unknown)} for privacy monitoring; "
            f"allowed: {', '.join(allowed)}"
        )
    if not names:
        raise ValueError(f"no attacks given; allowed: {', '.join(allowed)}")
    return tuple(dict.fromkeys(names))  # drop repeats, keep order


def _check_stop_if(stop_if: Mapping[str, float | None] | None) -> dict[str, float]:
    if stop_if is None:
        return {}
    if not isinstance(stop_if, Mapping):
        raise ValueError(
            f"stop_if must be a mapping of threshold names to numbers, got {stop_if!r}"
        )
    unknown = sorted(set(stop_if) - set(THRESHOLDS))
    if unknown:
        raise ValueError(
            f"unknown stop_if threshold(s) {', '.join(repr(k) for k in unknown)}; "
            f"allowed: {', '.join(THRESHOLDS)}"
        )
    checked = {}
    for key, limit in stop_if.items():
        if limit is None:
            continue
        if isinstance(limit, bool) or not isinstance(limit, Real) or not math.isfinite(limit):
            raise ValueError(f"stop_if[{key!r}] must be a finite number, got {limit!r}")
        checked[key] = float(limit)
    return checked


def _check_positive_int(name: str, value: Any, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _as_examples(data: Any, what: str) -> Examples:
    """``Examples``, a ``(texts, labels)`` pair or (causal LMs) a list of texts, checked:
    >= 2 texts, integer labels."""
    if isinstance(data, (list, tuple)) and data and all(isinstance(t, str) for t in data):
        data = (list(data), np.zeros(len(data), dtype=np.int64))  # texts only (causal LMs)
    if isinstance(data, Examples):
        ids, texts, labels = list(data.ids), list(data.texts), data.labels
    elif (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and not isinstance(data[0], (str, bytes, Mapping))
        and isinstance(data[0], Sequence)
    ):
        texts, labels = list(data[0]), data[1]
        ids = [f"{what}-{i}" for i in range(len(texts))]
    else:
        raise ValueError(
            f"{what} must be privacy_audit.defenses.base.Examples or a (texts, labels) pair, "
            f"got {type(data).__name__}"
        )
    labels = np.asarray(labels)
    if len(texts) == 0:
        raise ValueError(f"{what} is empty; the attacks need at least 2 {what}")
    if len(texts) < 2:
        raise ValueError(f"{what} has {len(texts)} example; the attacks need at least 2 {what}")
    if labels.shape != (len(texts),):
        raise ValueError(f"{what}: {len(texts)} texts but labels of shape {labels.shape}")
    if not all(isinstance(t, str) for t in texts):
        raise ValueError(f"{what}: every text must be a str")
    if labels.dtype.kind not in "iu" or (labels < 0).any():
        raise ValueError(
            f"{what}: labels must be non-negative class indices (map label names through "
            "model.config.label2id first)"
        )
    return Examples(ids=ids, texts=texts, labels=labels)


def _model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _label_names(model: torch.nn.Module, n_labels: int) -> list[str]:
    id2label = getattr(getattr(model, "config", None), "id2label", None)
    if isinstance(id2label, Mapping) and id2label:
        return [str(id2label[k]) for k in sorted(id2label, key=int)]
    return [str(i) for i in range(n_labels)]


def _logged(value) -> float:
    """A metric value for a logger; NaN when there is none (TPR below resolution)."""
    return math.nan if value is None else float(value)


def _flatten(results: dict[str, AttackResult]) -> dict[str, float]:
    flat: dict[str, float] = {}
    ok = {name: r for name, r in results.items() if r.status == "ok"}
    for name, r in ok.items():
        for metric in _PER_ATTACK:
            flat[f"privacy/{name}/{metric}"] = _logged(r.metrics[metric]["value"])
        flat[f"privacy/{name}/auc_ci_low"] = float(r.metrics["auc"]["ci_low"])
        flat[f"privacy/{name}/auc_ci_high"] = float(r.metrics["auc"]["ci_high"])
    if ok:
        for metric, _ in GATED.values():
            vals = [_logged(r.metrics[metric]["value"]) for r in ok.values()]
            vals = [v for v in vals if not math.isnan(v)]
            flat[f"privacy/max_{metric}"] = max(vals) if vals else math.nan
    return flat


class PrivacyMonitor:
    """Runs membership attacks on a model under training, when due.

    ``members`` is a sample of the training data, ``nonmembers`` held-out data from the
    same distribution; each is :class:`privacy_audit.defenses.base.Examples` or a ``(texts, labels)``
    pair with integer labels (at least 2 of each). ``every_n_steps`` makes
    :meth:`step` evaluate whenever ``global_step`` is a multiple of it (``None``:
    :meth:`step` never fires and only :meth:`evaluate` runs the attacks). ``stop_if``
    maps ``max_auc``/``max_tpr_at_1pct_fpr``/``max_epsilon_lb`` to thresholds; once
    one is exceeded, :attr:`should_stop` is True and :attr:`stopped_reason` says why.

    ``model`` and ``tokenizer`` may be ``None`` at construction and set later (the
    Trainer callback does so); the model must sit on a single device.
    """

    def __init__(
        self,
        model: torch.nn.Module | None,
        tokenizer: Any,
        members: Examples | tuple[Sequence[str], Any],
        nonmembers: Examples | tuple[Sequence[str], Any],
        *,
        attacks: str | Iterable[str] | None = None,
        every_n_steps: int | None = 100,
        stop_if: Mapping[str, float | None] | None = None,
        max_length: int | None = None,
        n_boot: int = 200,
        delta: float = 1e-5,
        seed: int = 0,
        batch_size: int = 64,
        kind: str = "auto",
        add_bos: bool | str = "auto",
        add_eos: bool = False,
    ) -> None:
        if kind not in MODEL_KINDS:
            raise ValueError(f"unknown model kind {kind!r}; allowed: {', '.join(MODEL_KINDS)}")
        self.kind = kind
        self._requested_attacks = attacks
        resolved = self._kind_of(model)
        if attacks is None:
            attacks = (
                DEFAULT_LM_MONITOR_ATTACKS if resolved == "causal-lm" else DEFAULT_MONITOR_ATTACKS
            )
        self.attacks = _check_attacks(attacks, resolved)
        self.every_n_steps = _check_positive_int("every_n_steps", every_n_steps, allow_none=True)
        self.stop_if = _check_stop_if(stop_if)
        # None: the model's context length, at most 512 (as `privacy-audit run`)
        self.max_length = _check_positive_int("max_length", max_length, allow_none=True)
        if add_bos not in ("auto", True, False) or add_eos not in (True, False):
            raise ValueError(
                f'add_bos must be "auto", True or False and add_eos True or False, got '
                f"{add_bos!r} and {add_eos!r}"
            )
        self.add_bos, self.add_eos = add_bos, add_eos
        self.batch_size = _check_positive_int("batch_size", batch_size)
        _check_positive_int("n_boot", n_boot)
        if isinstance(delta, bool) or not isinstance(delta, Real) or not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        self.settings = MetricSettings(delta=float(delta), n_boot=int(n_boot), seed=seed)
        plain = [
            isinstance(d, (list, tuple)) and bool(d) and all(isinstance(t, str) for t in d)
            for d in (members, nonmembers)
        ]
        self.texts_only = all(plain)
        classifier = self.kind == "classifier" or (model is not None and resolved == "classifier")
        if any(plain) and (not all(plain) or classifier):
            what = "members" if plain[0] else "nonmembers"
            raise ValueError(
                f"{what} must be privacy_audit.defenses.base.Examples or a (texts, labels) pair"
                + (" for a classifier" if classifier else " like the other set")
                + " (texts alone, for both sets, suffice for a causal LM)"
            )
        m = _as_examples(members, "members")
        n = _as_examples(nonmembers, "nonmembers")
        self.examples = Examples(
            ids=m.ids + n.ids,
            texts=m.texts + n.texts,
            labels=np.concatenate([m.labels, n.labels]),
            members=np.concatenate(
                [np.ones(len(m), dtype=np.int64), np.zeros(len(n), dtype=np.int64)]
            ),
        )
        self.model = model
        self.tokenizer = tokenizer
        self.history: list[dict[str, Any]] = []
        self.last_results: dict[str, AttackResult] = {}
        self.last_step: int | None = None
        self.should_stop = False
        self.stopped_reason: str | None = None

    def _kind_of(self, model) -> str:
        if self.kind != "auto":
            return self.kind
        return "classifier" if model is None else model_kind(model)

    def _release(self, model):
        """A release over the live model: classifier or causal LM."""
        claim = PrivacyClaim.none("Monitored during training.")
        if self._kind_of(model) == "causal-lm":
            from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

            tok = self.tokenizer
            if isinstance(tok, PreTrainedTokenizerBase):  # encoded as tokenizer(text)
                tok = HFTokenizer(tok, add_bos=self.add_bos, add_eos=self.add_eos)
            return HFLMRelease(
                model,
                tok,
                self._max_length(model),
                claim,
                device=str(_model_device(model)),
                batch_size=self.batch_size,
                place_model=False,
            )
        if self.texts_only:
            raise ValueError(
                "members/nonmembers were given as texts only; a classifier needs labels: "
                "pass (texts, labels) pairs"
            )
        n_labels = getattr(getattr(model, "config", None), "num_labels", None)
        if n_labels is not None and int(self.examples.labels.max()) >= n_labels:
            raise ValueError(
                f"labels go up to {int(self.examples.labels.max())} but the model has "
                f"{n_labels} classes"
            )
        return ClassifierRelease(  # a fresh release: its logits cache is per call
            model,
            self.tokenizer,
            self._max_length(model),
            claim,
            _label_names(model, int(self.examples.labels.max()) + 1),
            device=str(_model_device(model)),
            batch_size=self.batch_size,
        )

    def _max_length(self, model) -> int:
        """``max_length``, or the model's context length capped at 512 (never past it)."""
        from privacy_audit.audit.own_model import resolve_max_length

        return resolve_max_length(model, self.max_length or 512)

    def is_due(self, global_step: int) -> bool:
        """Whether :meth:`step` would evaluate at ``global_step``."""
        return (
            self.every_n_steps is not None
            and global_step % self.every_n_steps == 0
            and global_step != self.last_step
        )

    def step(self, global_step: int) -> dict[str, float] | None:
        """Evaluate if due at ``global_step`` (and not already evaluated there); the
        metrics, or ``None``. Call it after each optimizer step; ``step(0)`` before
        training gives a baseline."""
        if isinstance(global_step, bool) or not isinstance(global_step, (int, np.integer)):
            raise ValueError(f"global_step must be an integer, got {global_step!r}")
        if global_step < 0:
            raise ValueError(f"global_step must be >= 0, got {global_step}")
        if not self.is_due(int(global_step)):
            return None
        return self.evaluate(int(global_step))

    def evaluate(self, global_step: int) -> dict[str, float]:
        """Run the attacks now and record the result under ``global_step``."""
        if self.model is None:
            raise ValueError("PrivacyMonitor has no model to evaluate")
        if self.tokenizer is None:
            raise ValueError(
                "PrivacyMonitor has no tokenizer: pass tokenizer= (or, with the Trainer, "
                "processing_class=)"
            )
        model = self.model
        if self._requested_attacks is None and self.kind == "auto":
            # the model was bound after construction (Trainer callback): defaults by kind
            kind = self._kind_of(model)
            self.attacks = _check_attacks(
                DEFAULT_LM_MONITOR_ATTACKS if kind == "causal-lm" else DEFAULT_MONITOR_ATTACKS,
                kind,
            )
        was_training = model.training
        start = time.perf_counter()
        try:
            with torch.no_grad():
                release = self._release(model)
                results = {
                    name: run_attack(ATTACKS[name](), release, self.examples, self.settings)
                    for name in self.attacks
                }
        finally:
            model.train(was_training)
        metrics = _flatten(results)
        metrics["privacy/seconds"] = time.perf_counter() - start
        self.last_results = results
        self.last_step = global_step
        self.history.append({"step": global_step, **metrics})
        self._check_thresholds(global_step, metrics)
        return dict(metrics)

    def _check_thresholds(self, global_step: int, metrics: dict[str, float]) -> None:
        crossed = []
        for key, limit in self.stop_if.items():
            observed = metrics.get(THRESHOLDS[key])
            if observed is not None and observed > limit:
                crossed.append(f"{THRESHOLDS[key]} = {observed:.4g} > {key} = {limit:.4g}")
        if crossed and not self.should_stop:
            self.should_stop = True
            self.stopped_reason = f"at step {global_step}: " + "; ".join(crossed)


class PrivacyAuditCallback(TrainerCallback):
    """A ``transformers.Trainer`` callback that runs a :class:`PrivacyMonitor`.

    Evaluates every ``every_n_steps`` optimizer steps and/or at each epoch end
    (``every_epoch``; an epoch end that coincides with a step evaluation is not run
    twice). Metrics are appended to ``trainer.state.log_history`` with the ``step`` and
    ``epoch``; after :meth:`attach` they go through ``trainer.log`` instead, so logging
    integrations (TensorBoard, W&B, ...) receive them too. When a ``stop_if`` threshold
    is crossed, training stops (``control.should_training_stop``) and
    :attr:`stopped_reason` says why. The tokenizer is ``tokenizer`` or else the
    Trainer's ``processing_class``. Other arguments are :class:`PrivacyMonitor`'s.
    """

    def __init__(
        self,
        members: Examples | tuple[Sequence[str], Any],
        nonmembers: Examples | tuple[Sequence[str], Any],
        *,
        attacks: str | Iterable[str] | None = None,
        every_n_steps: int | None = None,
        every_epoch: bool = True,
        stop_if: Mapping[str, float | None] | None = None,
        tokenizer: Any = None,
        max_length: int | None = None,
        n_boot: int = 200,
        delta: float = 1e-5,
        seed: int = 0,
        batch_size: int = 64,
        kind: str = "auto",
        add_bos: bool | str = "auto",
        add_eos: bool = False,
    ) -> None:
        if every_n_steps is None and not every_epoch:
            raise ValueError("nothing to monitor: set every_n_steps, every_epoch=True, or both")
        self.monitor = PrivacyMonitor(
            None,
            tokenizer,
            members,
            nonmembers,
            attacks=attacks,
            every_n_steps=every_n_steps,
            stop_if=stop_if,
            max_length=max_length,
            n_boot=n_boot,
            delta=delta,
            seed=seed,
            batch_size=batch_size,
            kind=kind,
            add_bos=add_bos,
            add_eos=add_eos,
        )
        self.every_epoch = bool(every_epoch)
        self._trainer = None

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.monitor.history

    @property
    def should_stop(self) -> bool:
        return self.monitor.should_stop

    @property
    def stopped_reason(self) -> str | None:
        return self.monitor.stopped_reason

    def attach(self, trainer) -> PrivacyAuditCallback:
        """Log through ``trainer.log`` (so integrations see the metrics); adds this
        callback to the trainer if it is not there yet. Returns ``self``."""
        self._trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def _bind(self, kwargs: dict[str, Any]) -> None:
        model = kwargs.get("model")
        if model is not None:
            self.monitor.model = model
        if self.monitor.tokenizer is None:
            tok = kwargs.get("processing_class")
            if tok is None:
                tok = kwargs.get("tokenizer")  # transformers < 4.46
            if not isinstance(tok, PreTrainedTokenizerBase) and hasattr(tok, "tokenizer"):
                tok = tok.tokenizer  # a processor wrapping a tokenizer
            self.monitor.tokenizer = tok

    def _record(self, state, control, metrics: dict[str, float] | None) -> None:
        if metrics is None:
            return
        self.monitor.history[-1]["epoch"] = state.epoch
        if self._trainer is not None:
            self._trainer.log(dict(metrics))
        else:
            entry: dict[str, Any] = dict(metrics)
            if state.epoch is not None:
                entry["epoch"] = state.epoch
            entry["step"] = state.global_step
            state.log_history.append(entry)
        if self.monitor.should_stop:
            control.should_training_stop = True

    def on_train_begin(self, args, state, control, **kwargs):
        self._bind(kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        self._bind(kwargs)
        self._record(state, control, self.monitor.step(state.global_step))

    def on_epoch_end(self, args, state, control, **kwargs):
        if not self.every_epoch or self.monitor.last_step == state.global_step:
            return
        self._bind(kwargs)
        self._record(state, control, self.monitor.evaluate(state.global_step))
