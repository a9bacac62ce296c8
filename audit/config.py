"""TOML audit configs, validated at load: an error names the bad key and the allowed values.

See the README's "Config reference" for every key (their types, defaults and allowed
values are in audit/config_schema.py). ``load_config(None)`` returns the bundled default
audit (non-private vs DP-SGD on the fixture corpus). The model directories a config names
are checked and read afterwards, by audit/target_resolution.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from privacy_audit.attacks import ATTACKS, LEAKAGE_ATTACKS
from privacy_audit.attacks.shadow import SHADOW_ATTACKS
from privacy_audit.audit.config_schema import (
    NUMBER,
    SCHEMA,
    TOP_SECTIONS,
    TRAIN_OVERRIDES,
    check_integers,
    check_value,
    positive,
    read_section,
)
from privacy_audit.audit.epsilon.input_canaries import CANARY_KINDS
from privacy_audit.audit.textcap import MAX_LENGTH_CAP  # the default max_length, as is
from privacy_audit.defenses import DEFENSES
from privacy_audit.ground.errors import ConfigError
from privacy_audit.targets.loading import TargetSpec
from privacy_audit.targets.presets import LM_PRESETS

#: The default max_length of a model the suite trains.
TRAIN_MAX_LENGTH = 64


@dataclass(frozen=True)
class DefenseConfig:
    name: str
    label: str
    params: dict[str, Any]
    train_overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditConfig:
    title: str
    seed: int
    device: str
    data: dict[str, Any]
    target: TargetSpec
    # the trained model audited as it is (target.audit_dir / classifier_dir / an adapter's base)
    classifier_dir: str | None
    train: dict[str, Any]
    defenses: tuple[DefenseConfig, ...]
    attacks: tuple[str, ...]
    metrics: dict[str, Any]
    claim: dict[str, Any] | None
    aggregate_only: bool
    raw: dict[str, Any]
    source: str
    epsilon: dict[str, Any] = field(default_factory=dict)
    # [attacks.options.<name>]: validated options of leakage attacks, by attack name
    attack_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    bench: str | None = None  # [report] bench: a cost-of-privacy bench JSON for the report
    # [shadow] (None: no shadow-model attacks), [sweep] (None: no sweep), [executor]
    shadow: dict[str, Any] | None = None
    sweep: dict[str, Any] | None = None
    executor: dict[str, Any] = field(default_factory=dict)
    # the [target] options of auditing the user's own model as it is: kind (resolved),
    # adapter_dir, reference_dir(s), allow_uninitialized, dtype, device_map, batch_size,
    # add_bos, add_eos (empty when the suite trains the model; {"resolved": True} once checked)
    own_model: dict[str, Any] = field(default_factory=dict)
    # [report] leakage_top / per_token (the per-record leakage table and per-token values)
    leakage_map: dict[str, Any] = field(
        default_factory=lambda: {"leakage_top": 10, "per_token": False}
    )

    @property
    def audit_dir(self) -> str | None:
        return self.classifier_dir

    def to_dict(self) -> dict[str, Any]:
        """The resolved config, for the report and results.json."""
        return {
            "source": self.source,
            "title": self.title,
            "seed": self.seed,
            "device": self.device,
            "data": self.data,
            "target": {
                "preset": self.target.preset,
                "model_dir": self.target.model_dir,
                "classifier_dir": self.classifier_dir,
                "audit_dir": self.classifier_dir,
                "max_length": self.target.max_length,
                "public_epochs": self.target.public_epochs,
                **({"kind": self.target.kind} if self.target.kind != "auto" else {}),
                **{
                    k: v
                    for k, v in self.own_model.items()
                    if k not in ("resolved", "_fallback_kind")
                },
            },
            "train": self.train,
            "defenses": [
                {"name": d.name, "label": d.label, **d.params, **d.train_overrides}
                for d in self.defenses
            ],
            "attacks": list(self.attacks),
            "attack_options": self.attack_options,
            "metrics": self.metrics,
            "claim": self.claim,
            "report": {
                "aggregate_only": self.aggregate_only,
                "bench": self.bench,
                **self.leakage_map,
            },
            "epsilon": self.epsilon,
            # the executor is left out: where tasks ran never changes a number
            **({"shadow": self.shadow} if self.shadow is not None else {}),
            **({"sweep": self.sweep} if self.sweep is not None else {}),
        }


def _parse_defense(i: int, raw: Any) -> DefenseConfig:
    path = f"defenses[{i}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"config key '{path}' must be a table ([[defenses]])")
    raw = dict(raw)
    name = raw.pop("name", None)
    if not isinstance(name, str):
        raise ConfigError(f"config key '{path}.name' is required: one of {', '.join(DEFENSES)}")
    if name not in DEFENSES:
        raise ConfigError(
            f"unknown defense {name!r} at '{path}.name'; allowed: {', '.join(DEFENSES)}"
        )
    label = raw.pop("label", None)
    if label is not None and not isinstance(label, str):
        raise ConfigError(f"config key '{path}.label' must be a string")
    overrides = {}
    for key in TRAIN_OVERRIDES:
        if key in raw:
            types, _, check, allowed = SCHEMA["train"][key]
            overrides[key] = check_value(f"{path}.{key}", raw.pop(key), types, check, allowed)
    cls = DEFENSES[name]
    unknown = sorted(set(raw) - set(cls.PARAMS))
    if unknown:
        allowed = sorted(set(cls.PARAMS) | {"name", "label", *TRAIN_OVERRIDES})
        raise ConfigError(
            f"unknown config key {path + '.' + unknown[0]!r} for defense '{name}'; allowed keys: {', '.join(allowed)}"
        )
    for key, value in raw.items():
        types = cls.PARAMS[key][0]
        check_value(f"{path}.{key}", value, types, None, "")
    try:
        cls(**raw)  # the defense validates its own parameter values
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if label is None:
        label = (
            name if not raw else name + " (" + ", ".join(f"{k}={v}" for k, v in raw.items()) + ")"
        )
    return DefenseConfig(name, label, dict(raw), overrides)


def _check_user_unit(defenses, data: dict, target: dict, shadow: dict | None) -> None:
    """Refuse a user-level DP-SGD defense (``unit = "user"``) the run cannot train, before
    any model is loaded: it clips and samples users, so it needs each text's user
    (``[data] group``); only the classifier trainer has it (the causal-LM DP-SGD engine
    clips per sequence); shadow models include texts, not users, independently."""
    for i, d in enumerate(defenses):
        if d.name != "dp-sgd" or d.params.get("unit", "example") != "user":
            continue
        where = f"defenses[{i}] ('{d.label}') has unit = 'user'"
        if data["group"] is None:
            raise ConfigError(
                f"{where}: it clips and samples users, so it needs the user of every text: "
                "set 'data.group' = COLUMN (or --group-by COLUMN)"
            )
        if target["preset"] in LM_PRESETS:
            raise ConfigError(
                f"{where}: user-level DP-SGD trains classifier targets only; "
                f"'target.preset' = {target['preset']!r} is a causal LM (its DP-SGD is per sequence)"
            )
        if shadow is not None:
            raise ConfigError(
                f"{where}: '[shadow]' models include texts at random, not users; remove "
                "'[shadow]' or use unit = 'example'"
            )


def _attack_options(raw: dict[str, Any], names: list[str]) -> dict[str, dict[str, Any]]:
    """Validate ``[attacks.options.<name>]`` tables against each attack's OPTIONS (every
    leakage attack, and the membership attacks that declare OPTIONS)."""

    def optioned(name: str):  # looks up (imports) only the attacks the config names
        if name in LEAKAGE_ATTACKS:
            return LEAKAGE_ATTACKS[name]
        cls = ATTACKS[name] if name in ATTACKS else None
        return cls if getattr(cls, "OPTIONS", None) else None

    out: dict[str, dict[str, Any]] = {}
    for name, opts in raw.items():
        path = f"attacks.options.{name}"
        cls = optioned(name)
        if cls is None:
            allowed = ", ".join(n for n in names if optioned(n) is not None) or "none"
            raise ConfigError(
                f"config key {path!r} names no leakage attack (nor a membership attack with options) in "
                f"'attacks.names'; "
                f"options are allowed for: {allowed}"
            )
        if name not in names:
            raise ConfigError(f"config key {path!r}: attack {name!r} is not in 'attacks.names'")
        if not isinstance(opts, dict):
            raise ConfigError(f"config key {path!r} must be a table")
        for key, value in opts.items():
            if key not in cls.OPTIONS:
                raise ConfigError(
                    f"unknown config key {path + '.' + key!r}; allowed: "
                    f"{', '.join(sorted(cls.OPTIONS)) or 'none'}"
                )
            check_value(f"{path}.{key}", value, cls.OPTIONS[key][0], None, "")
        try:
            cls(**opts)
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        out[name] = dict(opts)
    return out


def parse_config(
    raw: dict[str, Any], source: str = "<config>", base_dir: Path | None = None
) -> AuditConfig:
    """Validate a parsed TOML config (``raw``) into an :class:`AuditConfig`; relative paths
    are read against ``base_dir`` (the config file's folder). No model directory is read
    here (:func:`privacy_audit.audit.target_resolution.resolve_targets` does that)."""
    _check_top_level(raw)
    top = read_section({k: v for k, v in raw.items() if k in SCHEMA[""]}, "")
    data = read_section(raw.get("data", {}), "data")
    target = read_section(raw.get("target", {}), "target")
    train = read_section(raw.get("train", {}), "train")
    attacks_sec = read_section(raw.get("attacks", {}), "attacks")
    metrics = read_section(raw.get("metrics", {}), "metrics")
    report = read_section(raw.get("report", {}), "report")
    epsilon = read_section(raw.get("epsilon", {}), "epsilon")
    executor = read_section(raw.get("executor", {}), "executor")
    shadow = _parse_shadow(raw["shadow"]) if "shadow" in raw else None
    sweep = read_section(raw["sweep"], "sweep") if "sweep" in raw else None

    resolve = _path_resolver(base_dir)
    _resolve_model_paths(resolve, data, target, shadow)
    top["device"] = resolve_device(top["device"])
    audit_dir, own_model = _audit_target(target)
    report["bench"] = resolve(report["bench"])
    for key in ("canaries_dir", "model_dir", "reference_dir"):
        epsilon[key] = resolve(epsilon[key])
    _check_canary_kind(epsilon["canary_kind"], target)
    names, attack_options = _attack_names(raw, attacks_sec["names"], attacks_sec["options"])

    as_is = bool(own_model)  # audit_dir / classifier_dir / adapter_dir: a trained model
    key = (
        "target.classifier_dir"
        if target["classifier_dir"] is not None
        else "target.audit_dir"
        if target["audit_dir"] is not None
        else "target.adapter_dir"
    )
    defenses = _parse_defenses(raw.get("defenses"), as_is, key, target, data)
    _check_what_applies(as_is, key, data, target, defenses, shadow)

    max_length = target["max_length"]
    if max_length is None:  # audited as it is: the model's context (read when loaded)
        max_length = MAX_LENGTH_CAP if as_is else TRAIN_MAX_LENGTH
    if as_is:
        own_model["max_length_auto"] = target["max_length"] is None

    claim = None
    if "claim" in raw:
        if not as_is:
            raise ConfigError("config key 'claim' applies only with 'target.classifier_dir'")
        claim = read_section(raw["claim"], "claim")

    cfg = AuditConfig(
        title=top["title"],
        seed=top["seed"],
        device=top["device"],
        data=data,
        target=TargetSpec(
            target["preset"],
            target["model_dir"],
            max_length,
            target["public_epochs"],
            target["kind"] if target["model_dir"] is not None else "auto",
        ),
        classifier_dir=audit_dir,
        train=train,
        defenses=defenses,
        attacks=tuple(names),
        attack_options=attack_options,
        metrics=metrics,
        claim=claim,
        aggregate_only=report["aggregate_only"],
        bench=report["bench"],
        raw=raw,
        source=source,
        epsilon=epsilon,
        shadow=shadow,
        sweep=_check_sweep(sweep, defenses, top["seed"]) if sweep is not None else None,
        executor=executor,
        own_model=own_model,
        leakage_map={"leakage_top": report["leakage_top"], "per_token": report["per_token"]},
    )
    if cfg.sweep is not None:
        expand_sweep(cfg)  # a sweep that expands to zero tasks fails here, before any work
    return cfg


def _check_top_level(raw: dict[str, Any]) -> None:
    """Known top-level keys, 64-bit integers throughout, and a table for each section."""
    unknown = sorted(set(raw) - set(TOP_SECTIONS) - set(SCHEMA[""]))
    if unknown:
        allowed = sorted(set(TOP_SECTIONS) | set(SCHEMA[""]))
        raise ConfigError(
            f"unknown config key {unknown[0]!r}; allowed top-level keys: {', '.join(allowed)}"
        )
    check_integers(raw)
    for sec in TOP_SECTIONS:
        if sec in raw and sec != "defenses" and not isinstance(raw[sec], dict):
            raise ConfigError(f"config key '{sec}' must be a table ([{sec}])")


def _path_resolver(base_dir: Path | None) -> Callable[[str | None], str | None]:
    """A path of the config read against ``base_dir`` (``~`` expanded); ``fixtures`` (the
    bundled corpus) and absolute paths as they are."""

    def resolve(p: str | None) -> str | None:
        if p is None or base_dir is None or p == "fixtures":
            return p
        q = Path(p).expanduser()
        return str(q if q.is_absolute() else (base_dir / q))

    return resolve


def _resolve_model_paths(
    resolve: Callable[[str | None], str | None], data: dict, target: dict, shadow: dict | None
) -> None:
    """The data files, model directories and ``[shadow]`` paths, resolved in place."""
    for key in ("corpus", "members", "nonmembers", "test", "public", "fresh"):
        data[key] = resolve(data[key])
    for key in ("model_dir", "audit_dir", "classifier_dir", "adapter_dir", "reference_dir"):
        target[key] = resolve(target[key])  # hub-style names are caught in resolve_targets
    if target["reference_dirs"] is not None:
        for i, d in enumerate(target["reference_dirs"]):
            if not isinstance(d, str) or not d:
                raise ConfigError(f"config key 'target.reference_dirs[{i}]' must be a directory")
        target["reference_dirs"] = [resolve(d) for d in target["reference_dirs"]]
    if shadow is not None:
        shadow["base_dir"] = resolve(shadow["base_dir"])
        if isinstance(shadow["population"], str):
            shadow["population"] = resolve(shadow["population"])


def _check_canary_kind(kind: str, target: dict) -> None:
    # a model_dir may be a causal LM (checked when it is loaded, before training)
    if kind not in CANARY_KINDS and target["preset"] not in LM_PRESETS and not target["model_dir"]:
        raise ConfigError(
            f"'epsilon.canary_kind' = {kind!r} is an LM canary design; it needs an LM target "
            f"('target.preset' one of {', '.join(LM_PRESETS)})"
        )


def _attack_names(
    raw: dict[str, Any], names: list, options: dict[str, Any]
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``attacks.names`` (each known, once), their ``[attacks.options]`` and, with
    ``[extraction]``, the extraction-risk attack."""
    known = [*ATTACKS, *LEAKAGE_ATTACKS]
    if not names:
        raise ConfigError(f"config key 'attacks.names' is empty; allowed: {', '.join(known)}")
    for n in names:
        if not isinstance(n, str) or n not in known:
            from privacy_audit.attacks.catalog import did_you_mean

            hint = did_you_mean(n, known) if isinstance(n, str) else ""
            raise ConfigError(
                f"unknown attack {n!r} in 'attacks.names'{hint}; allowed: {', '.join(known)}"
            )
    if len(set(names)) != len(names):
        raise ConfigError("config key 'attacks.names' lists an attack twice")
    attack_options = _attack_options(options, names)
    if "extraction" in raw:
        names, attack_options = _extraction(raw["extraction"], names, attack_options)
    return names, attack_options


def _parse_defenses(
    raw_defenses: Any, as_is: bool, key: str, target: dict, data: dict
) -> tuple[DefenseConfig, ...]:
    """The ``[[defenses]]`` the suite trains (by default one, without a defense); none when
    a trained model is audited as it is (``key`` names how the config gives it)."""
    if as_is:
        if raw_defenses:
            raise ConfigError(
                f"config sets '{key}' (audit a trained model as it is) and also "
                "'defenses'; remove one: a trained model is not retrained"
            )
        if target["model_dir"] is not None:
            raise ConfigError(f"set either '{key}' or 'target.model_dir', not both")
        if data["members"] is None or data["nonmembers"] is None:
            raise ConfigError(f"auditing '{key}' needs 'data.members' and 'data.nonmembers' files")
        return ()
    if raw_defenses is None:
        raw_defenses = [{"name": "none"}]
    if not isinstance(raw_defenses, list) or not raw_defenses:
        raise ConfigError(
            f"config key 'defenses' must be a non-empty list of tables; allowed names: {', '.join(DEFENSES)}"
        )
    defenses = tuple(_parse_defense(i, d) for i, d in enumerate(raw_defenses))
    labels = [d.label for d in defenses]
    if len(set(labels)) != len(labels):
        raise ConfigError("two defenses have the same label; give each a distinct 'label'")
    return defenses


def _check_what_applies(
    as_is: bool, key: str, data: dict, target: dict, defenses, shadow: dict | None
) -> None:
    """Keys that apply only when the suite trains the model, or only when the user's own
    model is audited as it is (``as_is``; ``key`` names how the config gives it)."""
    if target["public_epochs"] > 0 and as_is:
        raise ConfigError("'target.public_epochs' applies only when the suite trains the model")
    if (data["members"] is None) != (data["nonmembers"] is None):
        raise ConfigError("set both 'data.members' and 'data.nonmembers', or neither")
    if data["fresh"] is not None and not as_is:  # user inference needs the released model
        raise ConfigError(
            "'data.fresh' (user inference from fresh texts) applies to auditing your own "
            "trained model ('target.audit_dir' with 'data.members' and 'data.nonmembers')"
        )
    if data["group"] is not None and not as_is and data["members"] is None:
        # the suite splits a corpus by text (n_members texts), which would put one user's
        # texts on both sides: users must be split before training, by the caller
        raise ConfigError(
            f"'data.group' = {data['group']!r} needs the members and non-members split by "
            "user: set 'data.members' and 'data.nonmembers' files (the suite splits "
            "'data.corpus' by text, which puts a user on both sides)"
        )
    _check_user_unit(defenses, data, target, shadow)

    if (
        shadow is not None
        and as_is
        and shadow["base_dir"] is None
        and not (target["reference_dir"] or target["reference_dirs"] or target["adapter_dir"])
    ):  # without base_dir, [shadow] only sets LiRA / RMIA options for given references
        raise ConfigError(
            f"'shadow' with '{key}' fine-tunes reference models from your base model: set "
            "'shadow.base_dir' (references you already have go in 'target.reference_dirs')"
        )
    if shadow is not None and not as_is:
        for k in ("base_dir",) + (("population",) if isinstance(shadow["population"], str) else ()):
            if shadow[k] is not None:
                raise ConfigError(
                    f"'shadow.{k}' = {shadow[k]!r} applies only when auditing your own model "
                    "('target.audit_dir'); the suite's shadow models train like its target"
                )


DECODING_KEYS = ("temperature", "top_k", "top_p")


def _extraction(
    raw: dict[str, Any], names: list[str], attack_options: dict[str, dict[str, Any]]
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``[extraction]`` -> the ``extraction-risk`` attack and its options."""
    from privacy_audit.attacks.extraction_risk import ExtractionRisk

    sec = read_section(raw, "extraction")
    if "extraction-risk" in attack_options:
        raise ConfigError(
            "set extraction risk in '[extraction]' or in '[attacks.options.extraction-risk]', "
            "not both"
        )
    dec = sec["decoding"]
    unknown = sorted(set(dec) - set(DECODING_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown config key {'extraction.decoding.' + unknown[0]!r}; allowed: "
            f"{', '.join(DECODING_KEYS)}"
        )
    opts = {k: dec[k] for k in DECODING_KEYS if k in dec}
    opts.update(
        queries=sec["queries"],
        prefix_tokens=sec["prefix_tokens"],
        suffix_tokens=sec["suffix_tokens"],
    )
    try:
        ExtractionRisk(**opts)
    except ValueError as exc:
        raise ConfigError(f"[extraction]: {exc}") from None
    if "extraction-risk" not in names:
        names = [*names, "extraction-risk"]
    return names, {**attack_options, "extraction-risk": opts}


def _parse_shadow(raw: dict[str, Any]) -> dict[str, Any]:
    shadow = read_section(raw, "shadow")
    names = shadow["attacks"]
    if not names:
        raise ConfigError(
            f"config key 'shadow.attacks' is empty; allowed: {', '.join(SHADOW_ATTACKS)}"
        )
    for n in names:
        if not isinstance(n, str) or n not in SHADOW_ATTACKS:
            raise ConfigError(
                f"unknown shadow attack {n!r} in 'shadow.attacks'; allowed: {', '.join(SHADOW_ATTACKS)}"
            )
    if len(set(names)) != len(names):
        raise ConfigError("config key 'shadow.attacks' lists an attack twice")
    pop = shadow["population"]
    if any(n.startswith("rmia") for n in names) and isinstance(pop, int) and pop < 1:
        raise ConfigError("RMIA needs population samples: set 'shadow.population' >= 1")
    return shadow


@dataclass(frozen=True)
class Trial:
    defense: int  # index into cfg.defenses
    label: str
    params: dict[str, Any]  # overrides of the defense's params (the sweep's epsilon)
    seed: int  # training seed
    group: str  # the defense label this trial belongs to (sweep curves)
    epsilon: float | None  # the sweep's ε, or None


def expand_sweep(cfg: AuditConfig) -> list[Trial]:
    """One trial per defense without ``[sweep]``; else defenses × ε × seeds.

    Raises ConfigError when the sweep expands to zero tasks."""
    from privacy_audit.defenses import DEFENSES

    if cfg.sweep is None:
        return [Trial(i, d.label, {}, cfg.seed, d.label, None) for i, d in enumerate(cfg.defenses)]
    sw = cfg.sweep
    seeds = list(sw["seeds"])
    trials: list[Trial] = []
    for i, d in enumerate(cfg.defenses):
        if d.label not in sw["defenses"]:
            continue
        takes_eps = "epsilon" in DEFENSES[d.name].PARAMS
        eps_values: list[float | None] = (
            list(sw["epsilons"]) if takes_eps and sw["epsilons"] is not None else [None]
        )
        for eps in eps_values:
            params = {"epsilon": eps} if eps is not None else {}
            if params:
                try:
                    DEFENSES[d.name](**{**d.params, **params})
                except ValueError as exc:
                    raise ConfigError(
                        f"sweep: defense {d.label!r} at epsilon={eps:g}: {exc}"
                    ) from None
            for seed in seeds:
                label = d.label if eps is None else f"{d.label} @ eps={eps:g}"
                if len(seeds) > 1:
                    label += f" seed={seed}"
                trials.append(Trial(i, label, params, seed, d.label, eps))
    if not trials:
        raise ConfigError(
            "the sweep expands to zero tasks: "
            f"{len(sw['defenses'])} defense(s) × "
            f"{'no' if sw['epsilons'] is None else len(sw['epsilons'])} ε value(s) × "
            f"{len(seeds)} seed(s); list at least one of each"
        )
    labels = [t.label for t in trials]
    if len(set(labels)) != len(labels):
        dup = next(lab for lab in labels if labels.count(lab) > 1)
        raise ConfigError(
            f"the sweep gives two runs the label {dup!r}; give defenses distinct labels"
        )
    return trials


def _check_sweep(
    sweep: dict[str, Any], defenses: tuple[DefenseConfig, ...], seed: int
) -> dict[str, Any]:
    """Validate ``[sweep]`` and fill its defaults (all defenses, no ε grid, the config's seed);
    the expansion itself (and its zero-task error) is in :func:`expand_sweep`."""
    if not defenses:
        raise ConfigError("'sweep' needs defenses to train; it does not apply to 'classifier_dir'")
    labels = [d.label for d in defenses]
    out = dict(sweep)
    if out["defenses"] is None:
        out["defenses"] = labels
    for lab in out["defenses"]:
        if lab not in labels:
            raise ConfigError(
                f"unknown defense label {lab!r} in 'sweep.defenses'; allowed: {', '.join(labels)}"
            )
    if out["epsilons"] is not None:
        for e in out["epsilons"]:
            if isinstance(e, bool) or not isinstance(e, NUMBER) or not positive(e):
                raise ConfigError(f"'sweep.epsilons' must hold positive numbers, got {e!r}")
        out["epsilons"] = [float(e) for e in out["epsilons"]]
    if out["seeds"] is None:
        out["seeds"] = [seed]
    for s_ in out["seeds"]:
        if isinstance(s_, bool) or not isinstance(s_, int) or s_ < 0:
            raise ConfigError(f"'sweep.seeds' must hold integers >= 0, got {s_!r}")
    if len(set(out["seeds"])) != len(out["seeds"]):
        raise ConfigError("config key 'sweep.seeds' lists a seed twice")
    return out


#: ε and δ each defense's accountant can calibrate, per accountant where it matters:
#: defense -> accountant (or "*") -> ((ε min, ε max), (δ min, δ max)). Outside these the
#: calibration search does not end (Opacus doubles σ up to its cap for a tiny ε, and
#: bisects σ towards 0 forever for a huge one: ε = 1e-300 failed after 118 s and ε = 1e308
#: ran past 120 s before this check). Opacus's PRV accountant is slow above ε ≈ 50
#: (ε = 100 takes 30 s per calibration on a 2-core CPU); RDP calibrates ε = 1e12 in 3 s.
EPS_DELTA_RANGES: dict[str, dict[str, tuple[tuple[float, float], tuple[float, float]]]] = {
    "dp-sgd": {"prv": ((0.01, 50.0), (1e-12, 0.1)), "rdp": ((0.01, 1e9), (1e-12, 0.1))},
    "phantom-dp-sgd": {"prv": ((0.01, 50.0), (1e-12, 0.1)), "rdp": ((0.01, 1e9), (1e-12, 0.1))},
    "re-attention": {"prv": ((0.01, 50.0), (1e-12, 0.1)), "rdp": ((0.01, 1e9), (1e-12, 0.1))},
    "*": {"*": ((1e-3, 1e4), (1e-12, 0.1))},
}


def _check_eps_delta(i: int, d: DefenseConfig, defaults: dict[str, Any]) -> None:
    params = {k: v[1] for k, v in defaults.items()} | d.params
    if "epsilon" not in params and "delta" not in params:
        return
    table = EPS_DELTA_RANGES.get(d.name, EPS_DELTA_RANGES["*"])
    acc = params.get("accountant", "*")
    (e_lo, e_hi), (d_lo, d_hi) = table.get(acc, table.get("*", next(iter(table.values()))))
    how = f"{d.name}" + (f" with the {acc} accountant" if acc != "*" else "")
    eps = params.get("epsilon")
    if isinstance(eps, (int, float)) and not isinstance(eps, bool) and not e_lo <= eps <= e_hi:
        raise ConfigError(
            f"defenses[{i}].epsilon = {eps:g} is outside what {how} can calibrate: "
            f"use an ε in [{e_lo:g}, {e_hi:g}]"
        )
    delta = params.get("delta")
    if (
        isinstance(delta, (int, float))
        and not isinstance(delta, bool)
        and not d_lo <= delta <= d_hi
    ):
        raise ConfigError(
            f"defenses[{i}].delta = {delta:g} is outside what {how} can calibrate: "
            f"use a δ in [{d_lo:g}, {d_hi:g}]"
        )


def model_layers(spec: TargetSpec) -> int | None:
    """Number of transformer layers of the target model, from its config alone (no
    weights are loaded); ``None`` when it cannot be read here (the model loader then
    reports the problem)."""
    import json

    from privacy_audit.targets.lm import LM_PRESETS
    from privacy_audit.targets.loading import TINY_CONFIG, minilm_path

    if spec.model_dir:
        path = Path(spec.model_dir) / "config.json"
    elif spec.preset == "tiny":
        return int(TINY_CONFIG["num_hidden_layers"])
    elif spec.preset in LM_PRESETS:
        return int(LM_PRESETS[spec.preset]["n_layer"])
    elif spec.preset == "minilm":
        try:
            path = minilm_path() / "config.json"
        except Exception:  # noqa: BLE001 - reported by the loader
            return None
    else:
        return None
    try:
        conf = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(conf, dict):
        return None
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        n = conf.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
    return None


def _check_bench(path: str) -> None:
    """``[report] bench``: an existing ``privacy-audit bench`` JSON with a cost-of-privacy
    result (read as the report will read it, after a depth- and type-guarded parse)."""
    from privacy_audit.audit.cost_of_privacy_table import cost_table_from_bench_json
    from privacy_audit.ground.errors import AuditError
    from privacy_audit.ground.io import read_json

    try:
        read_json(path, "config key 'report.bench' file")
        cost_table_from_bench_json(path)
    except AuditError as exc:
        raise ConfigError(str(exc)) from None


def check_runnable(cfg: AuditConfig) -> None:
    """Checks that need the environment or files, run at config load before any work:
    the device against the installed torch, each defense's ε and δ against what its
    accountant can calibrate, layer indices against the model config, and the
    ``[report] bench`` file. Raises :class:`ConfigError` (exit 2)."""
    resolve_device(cfg.device)  # also checked at parse time; kept for configs built in code
    sweep_eps = (cfg.sweep or {}).get("epsilons") or []
    for i, d in enumerate(cfg.defenses):
        _check_eps_delta(i, d, DEFENSES[d.name].PARAMS)
        if "epsilon" in DEFENSES[d.name].PARAMS and d.label in (cfg.sweep or {}).get(
            "defenses", []
        ):
            for e in sweep_eps:
                _check_eps_delta(
                    i, replace(d, params={**d.params, "epsilon": e}), DEFENSES[d.name].PARAMS
                )
        layers = d.params.get("layers")
        if isinstance(layers, list) and layers:
            n = model_layers(cfg.target)
            if n is not None:
                for li in layers:
                    if isinstance(li, int) and not -n <= li < n:
                        raise ConfigError(
                            f"defenses[{i}].layers names layer {li}, but the target model has "
                            f"{n} layers (indices 0..{n - 1}, or -{n}..-1 from the end)"
                        )
    if cfg.bench is not None:
        _check_bench(cfg.bench)


def default_config_text() -> str:
    return (
        resources.files("privacy_audit.audit.configs")
        .joinpath("default.toml")
        .read_text(encoding="utf-8")
    )


def bundled_configs() -> list[str]:
    """Names of the configs shipped in ``audit/configs`` (``privacy-audit run NAME``)."""
    return sorted(
        f.name[: -len(".toml")]
        for f in resources.files("privacy_audit.audit.configs").iterdir()
        if f.name.endswith(".toml")
    )


def load_config(path: str | Path | None) -> AuditConfig:
    """Load and validate a TOML config; ``None`` loads the bundled default audit, and the
    name of a bundled config (``dp-forward``, ...) loads that one when no such file exists."""
    cfg = _load_config(path)
    check_runnable(cfg)
    return cfg


def _load_config(path: str | Path | None) -> AuditConfig:
    if path is None:
        return parse_config(tomllib.loads(default_config_text()), source="bundled default")
    p = Path(path)
    if not p.is_file() and str(path) in bundled_configs():
        text = (
            resources.files("privacy_audit.audit.configs")
            .joinpath(f"{path}.toml")
            .read_text("utf-8")
        )
        return parse_config(tomllib.loads(text), source=f"bundled {path}")
    if not p.is_file():
        if p.is_dir():
            raise ConfigError(f"config file {str(p)!r} is a directory, not a TOML config")
        if p.exists():
            raise ConfigError(f"config file {str(p)!r} is not a regular file (a device or a pipe)")
        raise ConfigError(
            f"config file {str(p)!r} does not exist (bundled configs: {', '.join(bundled_configs())})"
        )
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    except ValueError:  # int() past Python's 4300-digit limit escapes tomllib unwrapped
        raise ConfigError(
            f"config file {str(p)!r} is not valid TOML: an integer is too long"
        ) from None
    except RecursionError:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: nested too deeply") from None
    return parse_config(raw, source=str(p), base_dir=p.parent.resolve())


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when torch has CUDA, else ``cpu``; ``cuda`` without CUDA is an
    error here, at config load, before any data or model is read."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "a CUDA build"
        raise ConfigError(
            "device = 'cuda' but this torch build has no CUDA GPU available "
            f"(torch {torch.__version__} is {build}); use device = 'auto' or 'cpu'"
        )
    return name


def _audit_target(target: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The directory audited as it is and its options (no file system access here:
    :func:`privacy_audit.audit.target_resolution.resolve_targets` checks the directories
    and reads the model kind)."""
    if target["audit_dir"] is not None and target["classifier_dir"] is not None:
        raise ConfigError("set 'target.audit_dir' or its alias 'target.classifier_dir', not both")
    audit_dir = target["audit_dir"] or target["classifier_dir"]
    adapter = target["adapter_dir"]
    if audit_dir is None and adapter is None:
        for k in (
            "adapter_dir",
            "reference_dir",
            "reference_dirs",
            "allow_uninitialized",
            "add_eos",
        ):
            if target[k] not in (None, False):
                raise ConfigError(
                    f"'target.{k}' applies only when auditing a trained model "
                    "('target.audit_dir' or 'target.adapter_dir')"
                )
        if target["add_bos"] != "auto":
            raise ConfigError(
                "'target.add_bos' applies only when auditing a trained model "
                "('target.audit_dir' or 'target.adapter_dir')"
            )
        if target["model_dir"] is None and target["kind"] != "auto":
            raise ConfigError("'target.kind' applies only with 'target.audit_dir' or 'model_dir'")
        return None, {}
    if target["model_dir"] is not None and audit_dir is None:
        raise ConfigError("'target.adapter_dir' applies to 'target.audit_dir', not 'model_dir'")
    return audit_dir, {
        "kind": target["kind"],
        "adapter_dir": adapter,
        "reference_dir": target["reference_dir"],
        "reference_dirs": _reference_list(target["reference_dir"], target["reference_dirs"]),
        "allow_uninitialized": target["allow_uninitialized"],
        "dtype": target["dtype"],
        "device_map": target["device_map"],
        "batch_size": target["batch_size"],
        "add_bos": target["add_bos"],
        "add_eos": target["add_eos"],
        # the older key meant a classifier: the kind it falls back to when config.json
        # names no head
        "_fallback_kind": "classifier" if target["classifier_dir"] is not None else None,
    }


def _reference_list(one: str | None, many: list[str] | None) -> list[str]:
    """``reference_dir`` then ``reference_dirs``, each directory once."""
    out = ([one] if one else []) + list(many or [])
    seen = set()
    for d in out:
        if d in seen:
            raise ConfigError(f"reference model {d!r} is named twice")
        seen.add(d)
    return out
