"""Reference models on the user's own causal LM (issue 24, items 4-5): several given
references (``--reference`` repeated, ``[target] reference_dirs``), the adapter's base as
the default reference, and references fine-tuned by the suite from ``[shadow] base_dir``
(resumable), each feeding RMIA and LiRA."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.own_models import (
    build_causal_lm,
    fine_tune,
    random_texts,
    save,
    word_tokenizer,
    write_lines,
)

N = 24  # members and non-members each


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _attack(res: dict, name: str) -> dict:
    return next(a for a in res["runs"][0]["attacks"] if a["attack"] == name)


def _one_line_error(outcome, *needles):
    assert outcome.code == 2, (outcome.code, outcome.stderr[-2000:])
    lines = [ln for ln in outcome.stderr.splitlines() if ln.startswith("privacy-audit")]
    assert len(lines) == 1, outcome.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A base GPT-2 (d = 32), a copy fine-tuned on the members (the target), a second
    base (another init) and a LoRA adapter on the base trained on the members."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("refs")
    tok = word_tokenizer()
    members, nonmembers = random_texts(N, 11, length=8), random_texts(N, 12, length=8)
    write_lines(root / "members.txt", members)
    write_lines(root / "nonmembers.txt", nonmembers)
    write_lines(root / "population.txt", random_texts(16, 13, length=8))
    save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, root / "base")
    save(build_causal_lm("gpt2", len(tok), seed=1, d=32), tok, root / "base2")
    target = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    fine_tune(target, tok, members, epochs=25)
    save(target, tok, root / "target")
    peft_model = get_peft_model(
        build_causal_lm("gpt2", len(tok), seed=0, d=32),
        LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_fc"]),
    )
    fine_tune(peft_model, tok, members, epochs=30, lr=1e-2)
    peft_model.save_pretrained(root / "lora")
    cfg = json.loads((root / "lora" / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(root / "base")
    (root / "lora" / "adapter_config.json").write_text(json.dumps(cfg))
    return root


def _data_args(root: Path) -> list[str]:
    return ["--members", str(root / "members.txt"), "--nonmembers", str(root / "nonmembers.txt")]


def test_reference_repeated_on_the_one_liner(models, tmp_path, cli):
    root, out = models, tmp_path / "out"
    outcome = cli(
        ["run", "--model", str(root / "target"), *_data_args(root)]
        + ["--reference", str(root / "base"), "--reference", str(root / "base2")]
        + ["--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(out)
    refs = res["runs"][0]["target"]["references"]
    assert [m["path"] for m in refs["models"]] == [str(root / "base"), str(root / "base2")]
    for name in ("lira-offline", "rmia-offline"):
        a = _attack(res, name)
        assert a["status"] == "ok", a
        assert a["n_members"] == N and a["n_nonmembers"] == N
        assert "2 given reference models" in a["description"]
    # the target memorised its members; the references never saw them
    assert _attack(res, "lira-offline")["metrics"]["auc"]["ci_low"] > 0.5
    assert res["config"]["target"]["reference_dirs"] == [m["path"] for m in refs["models"]]


def test_lira_offline_equals_an_independent_computation(models, tmp_path, cli):
    """LiRA offline with given references, recomputed from plain transformers losses and
    scipy: log Pr[Z <= phi_target], Z ~ N(mean, sd) of the references' phi."""
    import torch
    from scipy.stats import norm
    from sklearn.metrics import roc_auc_score
    from transformers import AutoModelForCausalLM

    root, out = models, tmp_path / "out"
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{root / "target"}"\n'
        f'reference_dirs = ["{root / "base"}", "{root / "base2"}"]\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n'
        '[attacks]\nnames = ["lm-loss"]\n',
        encoding="utf-8",
    )
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    a = _attack(_results(out), "lira-offline")
    texts = [t for f in ("members.txt", "nonmembers.txt") for t in _lines(root / f)]
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    # the token ids the suite scores (its encoding convention); the losses are plain HF
    enc = load_causal_lm_release(
        load_audit_target(root / "target", "causal-lm"), 64, PrivacyClaim.none(""), "cpu"
    )
    rows = [torch.as_tensor(r)[None, :] for r in enc.token_ids(texts)]

    def phi(path):
        m = AutoModelForCausalLM.from_pretrained(path).eval()
        with torch.no_grad():
            loss = np.array([float(m(input_ids=r, labels=r).loss) for r in rows], np.float64)
        return -loss - np.log(-np.expm1(-loss))  # log(p / (1 - p)), p = exp(-loss)

    t_phi = phi(root / "target")
    r_phi = np.stack([phi(root / d) for d in ("base", "base2")])
    expect = norm.logcdf(t_phi, r_phi.mean(0), np.median(r_phi.std(0)))  # fixed variance
    y = np.r_[np.ones(N), np.zeros(N)]
    assert a["metrics"]["auc"]["value"] == pytest.approx(roc_auc_score(y, expect), abs=1e-6)


def _lines(path: Path) -> list[str]:
    return [t for t in path.read_text(encoding="utf-8").split("\n") if t.strip()]


def test_reference_dirs_bad_input_exits_2(models, tmp_path, cli):
    root = models
    other = word_tokenizer([f"x{i}" for i in range(50)])
    save(build_causal_lm("gpt2", len(other), d=32), other, tmp_path / "other")
    for refs, needles in (
        ([str(tmp_path / "missing")], ("missing",)),
        ([str(root / "base"), str(tmp_path / "other")], ("reference_dir", "different tokenizer")),
        ([str(root / "base"), str(root / "base")], ("named twice",)),
    ):
        cfg = tmp_path / "audit.toml"
        cfg.write_text(
            f'[target]\naudit_dir = "{root / "target"}"\nreference_dirs = {json.dumps(refs)}\n'
            f'[data]\nmembers = "{root / "members.txt"}"\n'
            f'nonmembers = "{root / "nonmembers.txt"}"\n',
            encoding="utf-8",
        )
        out = tmp_path / "out"
        _one_line_error(cli(["run", str(cfg), "--out", str(out), "--quiet"]), *needles)
        assert not (out / "results.json").exists()
    # [shadow] with audit_dir needs a base to fine-tune from
    cfg.write_text(
        f'[target]\naudit_dir = "{root / "target"}"\n[shadow]\nn_models = 2\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n',
        encoding="utf-8",
    )
    _one_line_error(cli(["run", str(cfg), "--out", str(tmp_path / "o2")]), "shadow.base_dir")
    cfg.write_text(
        f'[target]\naudit_dir = "{root / "target"}"\n'
        f'[shadow]\nn_models = 2\nbase_dir = "{root / "base"}"\npopulation = "nope.txt"\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n',
        encoding="utf-8",
    )
    _one_line_error(cli(["run", str(cfg), "--out", str(tmp_path / "o3")]), "nope.txt")
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()


def test_adapter_base_is_the_default_reference(models, tmp_path, cli):
    root, out = models, tmp_path / "out"
    outcome = cli(
        ["run", "--adapter", str(root / "lora"), *_data_args(root), "--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(out)
    run = res["runs"][0]
    (ref,) = run["target"]["references"]["models"]
    assert ref["path"] == str(root / "base") and "adapter's base model" in ref["source"]
    names = [a["attack"] for a in run["attacks"]]
    assert names == [
        "lm-loss",
        "zlib",
        "min-k",
        "min-k++",
        "reference",
        "ez-mia",
        "informia",
        "lira-offline",
        "rmia-offline",
    ]
    assert all(a["status"] == "ok" for a in run["attacks"])
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "reference_models" in html and str(root / "base") in html


def test_shadow_base_dir_trains_two_references_resumably(models, tmp_path, cli):
    root = models
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{root / "target"}"\n'
        f'[shadow]\nn_models = 2\nbase_dir = "{root / "base"}"\n'
        f'population = "{root / "population.txt"}"\nepochs = 2\nlora_rank = 2\n'
        f'[data]\nmembers = "{root / "members.txt"}"\nnonmembers = "{root / "nonmembers.txt"}"\n'
        '[attacks]\nnames = ["lm-loss"]\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(out)
    info = res["runs"][0]["target"]["trained_references"]
    assert info["n_models"] == 2 and info["recipe"]["finetune"] == "lora"
    assert info["pool"] == {
        "audited_texts": 2 * N,
        "population_texts": 16,
        "population_source": str(root / "population.txt"),
        "population_dropped_as_audited": 0,
    }
    assert sum(info["inclusion"]["n_train"]) == 2 * N + 16  # each text in exactly one of 2
    for name in ("lira-online", "lira-offline", "rmia-online", "rmia-offline"):
        assert _attack(res, name)["status"] == "ok", _attack(res, name)
    tasks = sorted((out / "run" / "tasks").glob("*.json"))
    assert len(tasks) == 2
    # --resume reuses both references: nothing is trained again, the numbers are the same
    log = out / "run" / "events.log"
    starts = log.read_text().count(" start ")
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet", "--resume"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert log.read_text().count(" start ") == starts
    again = _results(out)
    for name in ("lira-online", "rmia-offline"):
        assert _attack(again, name)["metrics"] == _attack(res, name)["metrics"]


def test_lira_with_one_model_per_side_has_no_ties():
    """One OUT reference: the old σ -> 0 turned log Pr[Z <= φ] into 0 for every φ above
    the reference (ties); now the scores rank by φ − φ_ref like an independent ranking."""
    from scipy.stats import rankdata

    from privacy_audit.attacks.shadow import lira_scores

    rng = np.random.default_rng(0)
    target, ref = rng.normal(size=50), rng.normal(size=50)
    s = lira_scores(
        target, ref[None, :], np.zeros((1, 50), bool), online=False, fixed_variance=True
    )
    assert np.all(np.isfinite(s)) and len(np.unique(s)) == 50
    assert np.array_equal(rankdata(s), rankdata(target - ref))
    # online with one IN and one OUT model: ranks by (φ − μ_out)² − (φ − μ_in)²
    shadow = rng.normal(size=(2, 50))
    keep = np.array([[True] * 50, [False] * 50])
    s = lira_scores(target, shadow, keep, online=True, fixed_variance=True)
    expect = (target - shadow[1]) ** 2 - (target - shadow[0]) ** 2
    assert np.all(np.isfinite(s)) and np.array_equal(rankdata(s), rankdata(expect))


def test_full_fine_tuning_reference_and_shadow_keys_outside_audit_dir(models):
    """``finetune = "full"`` trains every weight (the loss on its training half drops);
    ``[shadow] base_dir`` / a population file are refused when the suite trains the target."""
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.references import train_reference
    from privacy_audit.ground.errors import ConfigError

    root = models
    texts = _lines(root / "members.txt")[:8] + _lines(root / "nonmembers.txt")[:8]
    payload = {
        "base_dir": str(root / "base"),
        "recipe": {
            "finetune": "full",
            "learning_rate": 1e-2,
            "epochs": 8,
            "batch_size": 4,
            "lora_rank": 8,
            "lora_alpha": 16,
        },
        "texts": texts,
        "train": list(range(8)),
        "seed": 0,
        "max_length": 32,
        "device": "cpu",
        "dtype": "auto",
        "batch_size": 8,
    }
    out = train_reference(payload, [])
    loss = np.asarray(out["loss"])
    assert out["n_train"] == 8 and loss.shape == (16,)
    assert loss[:8].mean() < loss[8:].mean()  # it learned its half
    for shadow in (f'base_dir = "{root / "base"}"', 'population = "pop.txt"'):
        with pytest.raises(ConfigError, match="applies only when auditing your own model"):
            parse_config({"shadow": dict([shadow.replace('"', "").split(" = ")])})
