"""The keys of a TOML audit config, their types, defaults and allowed values, and the checks
that read one section against them: an error names the bad key and the allowed values.

audit/config.py parses a whole config with these; see the README's "Config reference"
for every key.
"""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.attacks import DEFAULT_ATTACKS
from privacy_audit.attacks.shadow import SHADOW_ATTACKS
from privacy_audit.audit.epsilon.input_canaries import CANARY_KINDS, LM_CANARY_DESIGNS
from privacy_audit.defenses.base import NOTIONS, UNITS
from privacy_audit.ground.errors import ConfigError
from privacy_audit.stats.scores import MAX_BOOTSTRAP
from privacy_audit.targets.loading import DEVICE_MAPS, DTYPES, KINDS, PRESETS

NUMBER = (int, float)
DEVICES = ("cpu", "cuda", "auto")
EXECUTORS = ("local", "ray")
# TOML integers are 64-bit; Python's parsers accept any size, which breaks float checks,
# repr() of the value in error messages (> 4300 digits) and torch.manual_seed.
_INT64 = (-(2**63), 2**63 - 1)


def positive(x: Any) -> bool:
    return x > 0 and math.isfinite(x)


# section -> key -> (accepted types, default, check or None, description of valid values)

SCHEMA: dict[str, dict[str, tuple]] = {
    "": {
        "title": (str, "Privacy audit", None, ""),
        "seed": (int, 0, lambda x: x >= 0, "an integer >= 0"),
        # auto: CUDA when torch has it, else CPU (resolved at load; see resolve_device)
        "device": (str, "auto", lambda x: x in DEVICES, f"one of {', '.join(DEVICES)}"),
    },
    "data": {
        "corpus": (str, "fixtures", None, ""),
        "members": (str, None, None, ""),
        "nonmembers": (str, None, None, ""),
        "test": (str, None, None, ""),
        "public": (str, None, None, ""),
        "text_column": (str, "text", None, ""),
        "label_column": (str, "label", None, ""),
        "id_column": (str, "id", None, ""),
        # the column naming each text's user (person): user-level statistics
        "group": (str, None, lambda x: bool(x.strip()), "a column name"),
        # texts of the member / non-member users never trained on (user inference)
        "fresh": (str, None, None, ""),
        "n_members": (int, 500, lambda x: x >= 2, "an integer >= 2"),
        "n_nonmembers": (int, 500, lambda x: x >= 2, "an integer >= 2"),
        "n_test": (int, 500, lambda x: x >= 1, "an integer >= 1"),
    },
    "target": {
        "preset": (str, "tiny", lambda x: x in PRESETS, f"one of {', '.join(PRESETS)}"),
        "model_dir": (str, None, None, ""),
        # the trained model audited as it is (classifier_dir: its older alias)
        "audit_dir": (str, None, None, ""),
        "classifier_dir": (str, None, None, ""),
        "kind": (str, "auto", lambda x: x in KINDS, f"one of {', '.join(KINDS)}"),
        "adapter_dir": (str, None, None, ""),
        "reference_dir": (str, None, None, ""),
        # several reference LMs (RMIA and offline LiRA against them; reference_dir is one more)
        "reference_dirs": (list, None, lambda x: len(x) >= 1, "a non-empty list of directories"),
        "allow_uninitialized": (bool, False, None, ""),
        "dtype": (str, "auto", lambda x: x in DTYPES, f"one of {', '.join(DTYPES)}"),
        "device_map": (str, "none", lambda x: x in DEVICE_MAPS, f"one of {', '.join(DEVICE_MAPS)}"),
        "batch_size": (int, 32, lambda x: x >= 1, "an integer >= 1"),
        # tokens per text; unset: 64 for a model the suite trains, the model's context
        # length capped at MAX_LENGTH_CAP for a model audited as it is
        "max_length": (int, None, lambda x: 8 <= x <= 512, "an integer in [8, 512]"),
        "public_epochs": (int, 0, lambda x: x >= 0, "an integer >= 0"),
        # how a causal LM audited as it is was trained: "auto" = tokenizer(text) as is
        # (targets/scoring.py HFTokenizer)
        "add_bos": (
            (bool, str),
            "auto",
            lambda x: isinstance(x, bool) or x == "auto",
            'true, false or "auto"',
        ),
        "add_eos": (bool, False, None, ""),
    },
    "train": {
        "epochs": (int, 10, lambda x: x >= 1, "an integer >= 1"),
        "batch_size": (int, 32, lambda x: x >= 1, "an integer >= 1"),
        "learning_rate": (NUMBER, 1e-3, positive, "a positive number"),
        "weight_decay": (NUMBER, 0.0, lambda x: x >= 0, "a number >= 0"),
    },
    "attacks": {
        "names": (list, list(DEFAULT_ATTACKS), None, ""),
        "options": (dict, {}, None, ""),
    },
    "metrics": {
        "delta": (NUMBER, 1e-5, lambda x: 0 < x < 1, "a number in (0, 1)"),
        "confidence": (NUMBER, 0.95, lambda x: 0 < x < 1, "a number in (0, 1)"),
        "bootstrap": (
            int,
            1000,
            lambda x: 100 <= x <= MAX_BOOTSTRAP,
            f"an integer in [100, {MAX_BOOTSTRAP:,}]",
        ),
    },
    "claim": {
        "epsilon": (NUMBER, None, positive, "a positive number"),
        "delta": (NUMBER, None, lambda x: 0 < x < 1, "a number in (0, 1)"),
        "unit": (str, None, lambda x: x in UNITS, f"one of {', '.join(UNITS)}"),
        "notion": (str, "none", lambda x: x in NOTIONS, f"one of {', '.join(NOTIONS)}"),
        "proven": (bool, False, None, ""),
        "note": (str, "Claim stated by the model's owner; not verified by this suite.", None, ""),
    },
    "report": {
        "aggregate_only": (bool, False, None, ""),
        # JSON written by `privacy-audit bench cost-of-privacy`: adds a "cost of privacy" table
        "bench": (str, None, None, ""),
        # the per-record leakage table and per-token map: how many members (0 = none)
        "leakage_top": (int, 10, lambda x: 0 <= x <= 1000, "an integer in [0, 1000]"),
        # results.json also gets every audited record's per-token log-probabilities
        "per_token": (bool, False, None, ""),
    },
    # [extraction]: extraction risk at the product's decoding settings
    # (attacks/extraction_risk.py); on when the section is given
    "extraction": {
        "decoding": (dict, {}, None, ""),
        "queries": (list, [1, 10, 100, 1000], None, ""),
        "prefix_tokens": (int, 32, lambda x: 1 <= x <= 4096, "an integer in [1, 4096]"),
        "suffix_tokens": (int, 32, lambda x: 1 <= x <= 4096, "an integer in [1, 4096]"),
    },
    "epsilon": {
        "enabled": (bool, False, None, ""),
        "gradient_trials": (
            int,
            100_000,
            lambda x: 1000 <= x <= 100_000_000,
            "an integer in [1000, 100,000,000]",
        ),
        "canaries": (
            int,
            200,
            lambda x: x == 0 or 20 <= x <= 100_000,
            "0 (off) or an integer in [20, 100,000]",
        ),
        "canary_kind": (
            str,
            "random-token",
            lambda x: x in (*CANARY_KINDS, *LM_CANARY_DESIGNS),
            f"one of {', '.join(dict.fromkeys((*CANARY_KINDS, *LM_CANARY_DESIGNS)))}",
        ),
        # LM canary designs (audit/epsilon/lm_canaries.py): insert each included canary r times;
        # the one-run bound accounts for the group size (stats/canary_bounds.py)
        "canary_repeat": (int, 1, lambda x: 1 <= x <= 64, "an integer in 1..64"),
        # LM canary designs: score = log p(secret) after training − log p(secret) under the
        # model before training (the run's init at its seed). Off by default: on the bundled
        # lm audit it did not raise the bound (docs/lm-canaries.md)
        "canary_reference": (bool, False, None, ""),
        # one-run white-box audit of the run's updates: Dirac canaries (0 = off)
        "white_box_canaries": (
            int,
            1000,
            lambda x: x == 0 or x >= 20,
            "0 (off) or an integer >= 20",
        ),
        # audit of a model trained outside the suite (`privacy-audit canaries audit --config`)
        "canaries_dir": (str, None, None, ""),
        "model_dir": (str, None, None, ""),
        "reference_dir": (str, None, None, ""),  # the model before training (calibration)
    },
    # [shadow]: shadow-model membership attacks (attacks/shadow.py); on when the section is given
    "shadow": {
        "n_models": (
            int,
            16,
            lambda x: 2 <= x <= 1024 and x % 2 == 0,
            "an even integer in [2, 1024]",
        ),
        "attacks": (list, list(SHADOW_ATTACKS), None, ""),
        # an integer: that many public examples (data.public); with target.audit_dir also a
        # text file of population texts the references may be trained on (audit/references.py)
        "population": (
            (int, str),
            200,
            lambda x: x >= 0 if isinstance(x, int) else bool(x),
            "an integer >= 0 or a file of population texts",
        ),
        # LiRA's σ: per example, one median σ (true), or "auto" = median below 64 shadow
        # models, where Carlini et al. (2022, §VI-A) find per-example σ too noisy
        "fixed_variance": (
            (bool, str),
            "auto",
            lambda x: isinstance(x, bool) or x == "auto",
            'true, false or "auto"',
        ),
        "rmia_offline_a": (NUMBER, 0.3, lambda x: 0 <= x <= 1, "a number in [0, 1]"),
        "rmia_gamma": (NUMBER, 1.0, positive, "a positive number"),
        # with target.audit_dir: fine-tune the n_models references from this base model
        "base_dir": (str, None, None, ""),
        "finetune": (str, "lora", lambda x: x in ("lora", "full"), "one of lora, full"),
        # the references' recipe (None: 1e-3 for LoRA, 5e-5 for full fine-tuning)
        "learning_rate": (NUMBER, None, positive, "a positive number"),
        "epochs": (int, 3, lambda x: x >= 1, "an integer >= 1"),
        "batch_size": (int, 8, lambda x: x >= 1, "an integer >= 1"),
        "lora_rank": (int, 8, lambda x: x >= 1, "an integer >= 1"),
        "lora_alpha": (NUMBER, 16, positive, "a positive number"),
    },
    # [sweep]: defenses x epsilon values x seeds (audit/scale/plan.py)
    "sweep": {
        "defenses": (list, None, None, ""),
        "epsilons": (list, None, None, ""),
        "seeds": (list, None, None, ""),
    },
    # [executor]: where tasks run (audit/scale/executors.py); never changes a number
    "executor": {
        "kind": (str, "local", lambda x: x in EXECUTORS, f"one of {', '.join(EXECUTORS)}"),
        "workers": (int, None, lambda x: x >= 1, "an integer >= 1"),
        "address": (str, None, None, ""),
        "cpus_per_task": (int, 1, lambda x: x >= 1, "an integer >= 1"),
        "memory_mb": (int, None, lambda x: x >= 1, "an integer >= 1"),
    },
}
TRAIN_OVERRIDES = ("epochs", "batch_size", "learning_rate", "weight_decay")


def _type_name(t) -> str:
    if isinstance(t, tuple):
        return "a number" if t == NUMBER else " or ".join(_type_name(x) for x in t)
    return {
        str: "a string",
        int: "an integer",
        bool: "true or false",
        list: "a list",
        dict: "a table",
        float: "a number",
    }[t]


def check_value(path: str, value: Any, types, check, allowed: str) -> Any:
    # bool is an int subclass in Python; a TOML true is never a valid number here.
    if isinstance(value, bool) and not (
        types is bool or (isinstance(types, tuple) and bool in types)
    ):
        raise ConfigError(f"config key '{path}' must be {_type_name(types)}, got {value!r}")
    if not isinstance(value, types):
        raise ConfigError(f"config key '{path}' must be {_type_name(types)}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"config key '{path}' must be finite, got {value!r}")
    if check is not None and not check(value):
        raise ConfigError(f"config key '{path}' must be {allowed}, got {value!r}")
    return value


def check_integers(raw: Any) -> None:
    """Reject integers outside TOML's 64-bit range anywhere in the document (iteratively:
    dotted keys can nest tables deeper than the recursion limit)."""
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            raise ConfigError(
                f"config key {path!r} holds an integer outside the 64-bit range TOML allows"
            )


def read_section(raw: dict, name: str) -> dict[str, Any]:
    schema = SCHEMA[name]
    prefix = f"{name}." if name else ""
    unknown = sorted(set(raw) - set(schema))
    if unknown:
        # repr(): a quoted TOML key may hold a newline; the error must stay one line
        raise ConfigError(
            f"unknown config key {prefix + unknown[0]!r}; allowed keys"
            f"{' in [' + name + ']' if name else ' at top level'}: {', '.join(sorted(schema))}"
        )
    out = {}
    for key, (types, default, check, allowed) in schema.items():
        out[key] = (
            check_value(prefix + key, raw[key], types, check, allowed) if key in raw else default
        )
    return out


TOP_SECTIONS = (
    "data",
    "target",
    "train",
    "attacks",
    "metrics",
    "claim",
    "report",
    "epsilon",
    "defenses",
    "shadow",
    "sweep",
    "executor",
    "extraction",
)
