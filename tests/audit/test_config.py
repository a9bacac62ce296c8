"""TOML config loading and validation (audit/config.py)."""

from __future__ import annotations

import pytest

from privacy_audit.audit.config import load_config, parse_config
from privacy_audit.audit.config_schema import TOP_SECTIONS
from privacy_audit.ground.errors import ConfigError


def _load(tmp_path, text: str, name: str = "audit.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return load_config(p)


def test_bundled_default_config():
    cfg = load_config(None)
    assert cfg.source == "bundled default"
    assert [(d.name, d.label) for d in cfg.defenses] == [
        ("none", "non-private"),
        ("dp-sgd", "dp-sgd (eps=8)"),
    ]
    assert cfg.defenses[1].params["epsilon"] == 8.0
    assert cfg.defenses[1].train_overrides == {"batch_size": 64}
    assert cfg.attacks == ("loss", "confidence", "entropy", "modified-entropy")
    assert cfg.data["corpus"] == "fixtures"
    assert cfg.target.preset == "tiny" and cfg.target.public_epochs == 4
    assert cfg.classifier_dir is None and cfg.claim is None


def test_tiny_config(tiny_config_path):
    cfg = load_config(tiny_config_path)
    assert cfg.source == str(tiny_config_path)
    assert (cfg.data["n_members"], cfg.data["n_nonmembers"], cfg.data["n_test"]) == (40, 40, 40)
    assert cfg.train["epochs"] == 1 and cfg.train["batch_size"] == 16
    assert cfg.target.max_length == 32
    assert cfg.metrics["bootstrap"] == 100
    assert [d.name for d in cfg.defenses] == ["none", "dp-sgd"]


def test_defaults_for_an_empty_config():
    cfg = parse_config({})
    assert cfg.title == "Privacy audit" and cfg.seed == 0 and cfg.device == "cpu"
    assert [(d.name, d.label, d.params) for d in cfg.defenses] == [("none", "none", {})]
    assert cfg.train == {"epochs": 10, "batch_size": 32, "learning_rate": 1e-3, "weight_decay": 0.0}
    assert cfg.metrics == {"delta": 1e-5, "confidence": 0.95, "bootstrap": 1000}
    assert cfg.aggregate_only is False
    d = cfg.to_dict()
    assert set(d) == {
        "source",
        "title",
        "seed",
        "device",
        "data",
        "target",
        "train",
        "defenses",
        "attacks",
        "attack_options",
        "metrics",
        "epsilon",
        "claim",
        "report",
    }
    assert d["defenses"] == [{"name": "none", "label": "none"}]


def test_default_defense_label_lists_its_parameters():
    cfg = parse_config({"defenses": [{"name": "dp-sgd", "epsilon": 4.0, "epochs": 2}]})
    (d,) = cfg.defenses
    assert d.label == "dp-sgd (epsilon=4.0)"
    assert d.params == {"epsilon": 4.0}
    assert d.train_overrides == {"epochs": 2}


def test_relative_paths_resolve_against_the_config_folder(tmp_path):
    sub = tmp_path / "cfgdir"
    (sub / "models" / "m").mkdir(parents=True)  # an existing relative dir, not a hub name
    cfg = _load(
        sub,
        '[data]\nmembers = "in.jsonl"\nnonmembers = "/abs/out.jsonl"\npublic = "fixtures"\n'
        '[target]\nmodel_dir = "models/m"\n',
    )
    assert cfg.data["members"] == str(sub.resolve() / "in.jsonl")
    assert cfg.data["nonmembers"] == "/abs/out.jsonl"
    assert cfg.data["public"] == "fixtures"
    assert cfg.data["corpus"] == "fixtures"
    assert cfg.target.model_dir == str(sub.resolve() / "models" / "m")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[train]\nepochz = 3\n", "unknown config key 'train.epochz'; allowed keys in \\[train\\]"),
        ('titel = "x"\n', "unknown config key 'titel'; allowed top-level keys"),
        ("data = 3\n", r"config key 'data' must be a table \(\[data\]\)"),
        (
            '[train]\nepochs = "three"\n',
            "config key 'train.epochs' must be an integer, got 'three'",
        ),
        ("[train]\nepochs = 0\n", "config key 'train.epochs' must be an integer >= 1, got 0"),
        ("[train]\nepochs = true\n", "'train.epochs' must be an integer, got True"),
        ("[train]\nlearning_rate = nan\n", "'train.learning_rate' must be finite"),
        ("[train]\nlearning_rate = -0.1\n", "'train.learning_rate' must be a positive number"),
        (
            "[metrics]\nbootstrap = 50\n",
            r"'metrics.bootstrap' must be an integer in \[100, 100,000\]",
        ),
        ("[metrics]\ndelta = 1.0\n", r"'metrics.delta' must be a number in \(0, 1\)"),
        ('device = "tpu"\n', "'device' must be one of cpu, cuda, auto"),
        ('[target]\npreset = "gpt5"\n', "'target.preset' must be one of tiny, minilm"),
        ("[target]\nmax_length = 4\n", r"'target.max_length' must be an integer in \[8, 512\]"),
        ("[data]\nn_members = 1\n", "'data.n_members' must be an integer >= 2"),
        ('[attacks]\nnames = "loss"\n', "'attacks.names' must be a list"),
        ("[attacks]\nnames = []\n", "'attacks.names' is empty; allowed: loss"),
        ('[attacks]\nnames = ["loss", "loss"]\n', "lists an attack twice"),
        ('[attacks]\nnames = ["x-ray"]\n', "unknown attack 'x-ray'.*allowed: loss, confidence"),
        ('[[defenses]]\nname = "dp-magic"\n', "unknown defense 'dp-magic'.*allowed: none, dp-sgd"),
        ("[[defenses]]\nepsilon = 1\n", "'defenses\\[0\\].name' is required: one of none, dp-sgd"),
        ('[defenses]\nname = "none"\n', "'defenses' must be a non-empty list of tables"),
        (
            '[[defenses]]\nname = "none"\n[[defenses]]\nname = "none"\n',
            "two defenses have the same label",
        ),
        (
            '[[defenses]]\nname = "dp-sgd"\nbatch_size = 0\n',
            "'defenses\\[0\\].batch_size' must be an integer >= 1",
        ),
        ('[[defenses]]\nname = "dp-sgd"\nepsilon = "8"\n', "'defenses\\[0\\].epsilon' must be"),
        ('[[defenses]]\nname = "none"\nlabel = 3\n', "'defenses\\[0\\].label' must be a string"),
        ("[claim]\nepsilon = 1.0\n", "'claim' applies only with 'target.classifier_dir'"),
        ('[data]\nmembers = "a.jsonl"\n', "set both 'data.members' and 'data.nonmembers'"),
        ('[target]\nclassifier_dir = "m"\n', "needs 'data.members' and 'data.nonmembers'"),
        (
            '[data]\nmembers = "a.jsonl"\nnonmembers = "b.jsonl"\n'
            '[target]\nclassifier_dir = "m"\n[[defenses]]\nname = "none"\n',
            "remove one: a trained model is not retrained",
        ),
        (
            '[data]\nmembers = "a.jsonl"\nnonmembers = "b.jsonl"\n'
            '[target]\nclassifier_dir = "m"\nmodel_dir = "n"\n',
            "set either 'target.classifier_dir' or 'target.model_dir', not both",
        ),
        (
            '[data]\nmembers = "a.jsonl"\nnonmembers = "b.jsonl"\n'
            '[target]\nclassifier_dir = "m"\npublic_epochs = 2\n',
            "'target.public_epochs' applies only when the suite trains",
        ),
        (
            '[data]\nmembers = "a.jsonl"\nnonmembers = "b.jsonl"\n'
            '[target]\nclassifier_dir = "m"\n[claim]\nunit = "household"\n',
            "'claim.unit' must be one of example, sequence, token, user",
        ),
    ],
)
def test_invalid_configs_name_the_problem(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_unknown_key_lists_the_allowed_keys(tmp_path):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "[train]\nepochz = 3\n")
    for key in ("batch_size", "epochs", "learning_rate", "weight_decay"):
        assert key in str(info.value)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "[nope]\nx = 1\n")
    for section in TOP_SECTIONS:
        assert section in str(info.value)


def test_file_level_errors(tmp_path):
    with pytest.raises(ConfigError, match="missing.toml' does not exist"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        _load(tmp_path, "[train\n")
    p = tmp_path / "latin.toml"
    p.write_bytes('title = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(p)
    with pytest.raises(ConfigError, match="is a directory, not a TOML config"):
        load_config(tmp_path)  # a directory is not a config file


def test_claim_for_a_trained_classifier(tmp_path):
    cfg = _load(
        tmp_path,
        '[data]\nmembers = "a.jsonl"\nnonmembers = "b.jsonl"\n'
        '[target]\nclassifier_dir = "model"\n'
        '[claim]\nepsilon = 2\ndelta = 1e-6\nunit = "user"\nnotion = "central-dp"\n',
    )
    assert cfg.defenses == ()
    assert cfg.classifier_dir == str(tmp_path.resolve() / "model")
    assert cfg.claim == {
        "epsilon": 2,
        "delta": 1e-6,
        "unit": "user",
        "notion": "central-dp",
        "proven": False,
        "note": "Claim stated by the model's owner; not verified by this suite.",
    }


def test_bundled_config_loads_by_name():
    from privacy_audit.audit.config import bundled_configs

    assert "default" in bundled_configs()
    cfg = load_config("default")
    assert cfg.source == "bundled default" and cfg.title.startswith("Default audit")
    with pytest.raises(ConfigError, match="bundled configs: .*default"):
        load_config("no-such-config")
