"""The light commands start light (issue 38, item 1): ``privacy-audit --help``, ``gate``,
``score`` without texts and ``export-risky`` import neither torch nor transformers, and
the mechanism and attack registries import a module only when a name is looked up.

Each command runs in a fresh interpreter (an import made by another test would hide one
made by the command), through the CLI's ``main``, and prints the heavy modules it loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from privacy_audit.registry import LazyRegistry

HEAVY = ("torch", "transformers", "sklearn", "scipy", "matplotlib", "pandas", "jinja2", "ray")

#: heavy modules each light command may load (torch and transformers never)
ALLOWED = {
    "--help": set(),
    "gate": set(),
    "export-risky": set(),
    # the report's plots (matplotlib), its template (jinja2) and the metrics' intervals (scipy)
    "score": {"scipy", "matplotlib", "jinja2"},
}

_DRIVER = textwrap.dedent(
    """
    import json, sys
    from privacy_audit.audit.cli import main
    try:
        rc = main(sys.argv[1:])
    except SystemExit as exc:
        rc = exc.code
    heavy = sorted(m for m in {heavy!r} if m in sys.modules)
    print(json.dumps({{"rc": rc, "heavy": heavy}}), file=sys.stderr)
    """
).format(heavy=HEAVY)


def _command(argv: list[str], cwd: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-c", _DRIVER, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = json.loads(r.stderr.strip().splitlines()[-1])
    return last["rc"], last["heavy"]


def test_light_commands_import_no_torch(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["score,member,id"] + [
        f"{rng.normal(0.5 * (i % 2)):.6f},{i % 2},r{i}" for i in range(200)
    ]
    (tmp_path / "scores.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    runs = {
        "--help": ["--help"],
        "score": ["score", "scores.csv", "--out", "out", "--bootstrap", "100"],
        "gate": ["gate", "out/results.json", "--max-auc", "0.99"],
    }
    loaded = {}
    for name, argv in runs.items():
        rc, loaded[name] = _command(argv, tmp_path)
        assert rc == 0, (name, rc)
    # export-risky on a results file with a per-record ranking (a causal-LM audit writes one)
    res = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    res["runs"][0]["leakage_ranking"] = {"ids": ["r3", "r1", "r5"]}
    (tmp_path / "ranked.json").write_text(json.dumps(res), encoding="utf-8")
    argv = ["export-risky", "ranked.json", "--top", "2", "--out", "ids.txt"]
    rc, loaded["export-risky"] = _command(argv, tmp_path)
    assert rc == 0
    assert (tmp_path / "ids.txt").read_text(encoding="utf-8") == "r3\nr1\n"
    for name, heavy in loaded.items():
        assert "torch" not in heavy and "transformers" not in heavy, (name, heavy)
        assert set(heavy) <= ALLOWED[name], f"{name} loaded {set(heavy) - ALLOWED[name]}"


def test_registries_load_a_mechanism_when_a_config_names_it(tmp_path):
    """Importing the packages loads no mechanism; a config naming dp-sgd loads dp-sgd (and
    the attacks it names), not dp-forward or the LM attacks."""
    code = textwrap.dedent(
        """
        import sys
        from privacy_audit.defenses import DEFENSES
        from privacy_audit.attacks import ATTACKS, LEAKAGE_ATTACKS, ALL_ATTACK_NAMES
        assert DEFENSES.loaded() == [] and ATTACKS.loaded() == [] and LEAKAGE_ATTACKS.loaded() == []
        assert "dp-forward" in DEFENSES and "recall" in ATTACKS and "recall" in ALL_ATTACK_NAMES
        assert "privacy_audit.defenses.dp_forward" not in sys.modules
        from privacy_audit.audit.config import parse_config
        parse_config({"defenses": [{"name": "none"}, {"name": "dp-sgd", "epsilon": 8.0}],
                      "attacks": {"names": ["loss", "inversion-nn"],
                                  "options": {"inversion-nn": {"n_sequences": 4}}}})
        print(sorted(DEFENSES.loaded()), sorted(ATTACKS.loaded()), LEAKAGE_ATTACKS.loaded())
        print("privacy_audit.defenses.dp_forward" in sys.modules,
              "privacy_audit.attacks.recall_mia" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    regs, modules = r.stdout.splitlines()
    assert regs == "['dp-sgd', 'none'] [] ['inversion-nn']"
    assert modules == "False False"


def test_lazy_registries_equal_the_classes_they_name():
    """Every entry resolves to the class of that name; the tuples the attack modules export
    are all registered (a registration left out, or a name mistyped, fails here)."""
    from privacy_audit.attacks import ALL_ATTACK_NAMES, ATTACKS, DEFAULT_ATTACKS, LEAKAGE_ATTACKS
    from privacy_audit.attacks.base import Attack, LeakageAttack
    from privacy_audit.attacks.extraction import EXTRACTION_ATTACKS
    from privacy_audit.attacks.llm_membership import LLM_ATTACKS
    from privacy_audit.defenses import DEFENSES, DPSGD
    from privacy_audit.defenses.base import Defense
    from privacy_audit.defenses.dp_sgd import DPSGD as Direct

    for registry, base in (
        (DEFENSES, Defense),
        (ATTACKS, Attack),
        (LEAKAGE_ATTACKS, LeakageAttack),
    ):
        for name in registry:
            cls = registry[name]
            assert issubclass(cls, base) and cls.name == name, (name, cls)
    assert {c.name for c in LLM_ATTACKS} <= set(ATTACKS)
    assert {c.name for c in EXTRACTION_ATTACKS} <= set(LEAKAGE_ATTACKS)
    assert DEFAULT_ATTACKS == ("loss", "confidence", "entropy", "modified-entropy")
    assert ALL_ATTACK_NAMES == (*ATTACKS, *LEAKAGE_ATTACKS)
    assert DPSGD is Direct is DEFENSES["dp-sgd"]


def test_lazy_registry_behaves_as_a_dict():
    reg = LazyRegistry({"a": "json:dumps", "b": "os.path:join"})
    assert list(reg) == ["a", "b"] and len(reg) == 2 and "a" in reg and "z" not in reg
    assert reg.loaded() == []
    assert reg["a"] is json.dumps and reg.loaded() == ["a"]
    reg["c"] = int
    assert dict(reg) == {"a": json.dumps, "b": os.path.join, "c": int}
    del reg["c"]
    assert list(reg) == ["a", "b"]
    with pytest.raises(KeyError):
        reg["z"]


def test_dumps_json_flat_lists_keep_every_value():
    """results.json writes long scalar lists on one line with the C encoder: the parsed
    document equals the general path's, non-finite floats still become null, and a data
    string that looks like the placeholder stays a string."""
    from privacy_audit.ground.io import dumps_json, json_safe

    rng = np.random.default_rng(0)
    obj = {
        "scores": rng.normal(size=1000).tolist(),
        "array": np.arange(500),
        "with_nan": np.r_[np.nan, np.inf, rng.normal(size=300)],
        "mixed": [1, 2.5, None, "x", True] * 100,
        "short": [1.0, 2.0],
        "nested": [{"k": list(range(300))}, [1, 2]],
        "tricky": ["@@flat-0000000000000000-0"] * 300,
        "scalar": np.float32(1.5),
        "text": "@@flat-0000000000000000-0",
    }
    got = dumps_json(obj)
    ref = json.dumps(json_safe(obj), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    assert json.loads(got) == json.loads(ref)
    assert json.loads(got)["with_nan"][:2] == [None, None]
    assert '"short": [\n' in got  # short lists keep the indented layout


def test_score_with_a_text_column_imports_no_torch(tmp_path):
    """The split check of a scores file's texts (sklearn, scipy) loads no torch: the text
    cap's constant comes from audit.textcap, not the config (which imports torch)."""
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(300)]
    rows = ["score,member,id,text"] + [
        f"{rng.normal(0.5 * (i % 2)):.6f},{i % 2},r{i},{' '.join(rng.choice(words, 12))}"
        for i in range(120)
    ]
    (tmp_path / "scores.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    rc, heavy = _command(["score", "scores.csv", "--out", "out", "--bootstrap", "100"], tmp_path)
    assert rc == 0
    assert "torch" not in heavy and "transformers" not in heavy, heavy


def test_a_misspelt_attack_is_refused_without_torch_and_with_a_suggestion(tmp_path):
    """``run --attacks ez_mia`` exits 2 naming the attack it meant, before config loading
    imports torch (a refusal that cost seconds of CPU and 290 MB)."""
    rc, heavy = _command(["run", "--model", "nope", "--attacks", "lm-loss,ez_mia"], tmp_path)
    assert rc == 2
    assert "torch" not in heavy and "transformers" not in heavy, heavy
    from privacy_audit.attacks.catalog import check_names

    with pytest.raises(
        ValueError, match=r"unknown attack 'ez_mia' in --attacks; did you mean 'ez-mia'\?"
    ):
        check_names("lm-loss,ez_mia")
    with pytest.raises(ValueError, match=r"'LM-LOSS'.*did you mean 'lm-loss'\?"):
        check_names("LM-LOSS")
    with pytest.raises(ValueError) as exc:
        check_names("quux")
    assert "did you mean" not in str(exc.value)


def test_the_attack_listing_imports_no_torch_and_matches_the_classes(tmp_path):
    """``privacy-audit attacks`` reads the stored rows (0.2 s, no torch); the rows are what
    the classes state (regenerate with ``python -m privacy_audit.attacks.catalog``)."""
    from privacy_audit.attacks.catalog import catalog

    assert catalog() == catalog(from_classes=True)
    rc, heavy = _command(["attacks"], tmp_path)
    assert rc == 0
    assert "torch" not in heavy and "transformers" not in heavy, heavy


def test_a_misspelt_attack_lists_the_names_for_the_models_kind(tmp_path):
    """With a model folder whose config names a causal LM, the refusal lists the causal-LM
    attacks only (no classifier attacks such as `loss` or `entropy`), still without torch."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}), "utf-8"
    )
    from privacy_audit.attacks.catalog import check_names

    with pytest.raises(ValueError) as exc:
        check_names("ez_mia", "causal-lm")
    msg = str(exc.value)
    listed = msg.split("valid for a causal-lm: ")[1].split(" (privacy-audit")[0].split(", ")
    assert "ez-mia" in listed and "lm-loss" in listed and "llm" in listed
    assert "loss" not in listed and "entropy" not in listed and "modified-entropy" not in listed
    with pytest.raises(ValueError) as exc:
        check_names("lm_loss", "classifier")
    listed = str(exc.value).split("valid for a classifier: ")[1].split(" (privacy")[0].split(", ")
    assert "loss" in listed and "lm-loss" not in listed and "llm" not in listed
    rc, heavy = _command(["run", "--model", str(model), "--attacks", "ez_mia"], tmp_path)
    assert rc == 2 and "torch" not in heavy, heavy
