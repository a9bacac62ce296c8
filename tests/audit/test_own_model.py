"""Auditing the user's own model (issue 15), end to end through the CLI.

Users' models are built here from small configs (tests/own_models.py), fine-tuned until
they memorise the member texts, saved with ``save_pretrained`` **without a pad token**,
and audited from ``members.txt`` / ``nonmembers.txt`` with a few-line config, with the
``run --model`` one-liner, with a LoRA adapter and with a user reference model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.own_models import (
    build_causal_lm,
    fine_tune,
    random_texts,
    save,
    word_tokenizer,
    write_lines,
)

N = 32  # members and non-members each


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _attack(res: dict, name: str, run: int = 0) -> dict:
    return next(a for a in res["runs"][run]["attacks"] if a["attack"] == name)


def _one_line_error(outcome, *needles):
    assert outcome.code == 2, (outcome.code, outcome.stderr[-2000:])
    lines = [ln for ln in outcome.stderr.splitlines() if ln.startswith("privacy-audit")]
    assert len(lines) == 1, outcome.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def users_models(tmp_path_factory):
    """GPT-2 and Llama fine-tuned on the members, a base GPT-2 (before fine-tuning, the
    reference) and a LoRA adapter trained on the members on top of that base."""
    root = tmp_path_factory.mktemp("byo")
    tok = word_tokenizer()
    members, nonmembers = random_texts(N, 1), random_texts(N, 2)
    write_lines(root / "members.txt", members)
    write_lines(root / "nonmembers.txt", [""] + nonmembers + ["  "])  # blank lines ignored
    base = build_causal_lm("gpt2", len(tok), seed=0)
    save(base, tok, root / "gpt2-base")
    for arch in ("gpt2", "llama"):
        model = build_causal_lm(arch, len(tok), seed=0)
        fine_tune(model, tok, members, epochs=30)
        save(model, tok, root / arch)
    # LoRA on the base GPT-2, trained on the members in this test
    from peft import LoraConfig, get_peft_model

    lora_base = build_causal_lm("gpt2", len(tok), seed=0)
    peft_model = get_peft_model(
        lora_base, LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn", "c_fc"])
    )
    fine_tune(peft_model, tok, members, epochs=40, lr=1e-2)
    peft_model.save_pretrained(root / "lora")
    cfg = json.loads((root / "lora" / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(root / "gpt2-base")
    (root / "lora" / "adapter_config.json").write_text(json.dumps(cfg))
    assert "pad_token" not in json.loads((root / "gpt2" / "tokenizer_config.json").read_text())
    return root


@pytest.mark.slow
def test_users_gpt2_and_llama_end_to_end(users_models, cli):
    root = users_models
    cfg = root / "audit.toml"
    cfg.write_text(
        '[target]\naudit_dir = "gpt2"\nreference_dir = "gpt2-base"\n'
        '[data]\nmembers = "members.txt"\nnonmembers = "nonmembers.txt"\n',
        encoding="utf-8",
    )
    out = root / "out-gpt2"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(out)
    run = res["runs"][0]
    assert run["target"]["kind"] == "causal-lm"
    assert run["target"]["architecture"] == "GPT2LMHeadModel"
    assert run["target"]["uninitialized_weights"] == []
    enc = run["target"]["encoding"]  # the convention is recorded (issue 24)
    assert enc["encoding"] == "tokenizer(text)" and enc["prefix_tokens"] == []
    assert enc["first_token"].startswith("not scored: no BOS")
    assert enc["max_length"] == 64  # the model's context length (under the 512 cap)
    assert enc["max_length_source"].startswith("the model's context length")
    assert run["target"]["texts_cut_to_max_length"] == 0
    assert "first token not scored: no BOS" in (out / "report.html").read_text("utf-8")
    names = [a["attack"] for a in run["attacks"]]
    # LM defaults + reference, then RMIA and offline LiRA against the reference
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
    loss = _attack(res, "lm-loss")
    assert loss["n_members"] == N and loss["n_nonmembers"] == N  # blank lines ignored
    assert loss["metrics"]["auc"]["ci_low"] > 0.5
    ref = _attack(res, "reference")  # the user's reference model, not the suite's
    assert ref["status"] == "ok" and ref["metrics"]["auc"]["ci_low"] > 0.5
    ids = loss["examples"]["ids"]
    assert ids[0] == "members:1" and "nonmembers:2" in ids  # file stem : line number
    # --quiet keeps only the one VERDICT line per run (issue 17); the report is written
    assert outcome.stdout.startswith("VERDICT gpt2: ") and (out / "report.html").is_file()

    # the one-liner, on the Llama-shaped model
    out = root / "out-llama"
    outcome = cli(
        [
            "run",
            "--model",
            str(root / "llama"),
            "--members",
            str(root / "members.txt"),
            "--nonmembers",
            str(root / "nonmembers.txt"),
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(out)
    assert res["runs"][0]["target"]["architecture"] == "LlamaForCausalLM"
    assert _attack(res, "lm-loss")["metrics"]["auc"]["ci_low"] > 0.5
    assert (out / "report.html").is_file()

    # a LoRA adapter on top of its base, named by the adapter's adapter_config.json
    out = root / "out-lora"
    outcome = cli(
        ["run", "--adapter", str(root / "lora"), "--members", str(root / "members.txt")]
        + ["--nonmembers", str(root / "nonmembers.txt"), "--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(out)
    assert res["runs"][0]["target"]["adapter"]["type"] == "LORA"
    assert _attack(res, "lm-loss")["metrics"]["auc"]["ci_low"] > 0.5
    # the same base without the adapter leaks nothing it never saw. It never saw any
    # text, so any two fresh sets of random texts test it; 32 + 32 are too few: over 200
    # draws of 32 + 32 texts its lm-loss AUC was 0.507 (SD 0.073), and the fixture's own
    # draw sits in the 1% tail (0.68) once scored on tokenizer(text) (issue 24)
    write_lines(root / "fresh-a.txt", random_texts(200, 3))
    write_lines(root / "fresh-b.txt", random_texts(200, 4))
    outcome = cli(
        ["run", "--model", str(root / "gpt2-base"), "--members", str(root / "fresh-a.txt")]
        + ["--nonmembers", str(root / "fresh-b.txt"), "--out", str(root / "o"), "--quiet"]
    )
    assert outcome.code == 0
    assert _attack(_results(root / "o"), "lm-loss")["metrics"]["auc"]["ci_low"] < 0.5


def test_reference_with_another_tokenizer_is_refused(users_models, tmp_path, cli):
    root = users_models
    other = word_tokenizer([f"x{i}" for i in range(50)])
    save(build_causal_lm("gpt2", len(other)), other, tmp_path / "ref")
    outcome = cli(
        ["run", "--model", str(root / "gpt2"), "--reference", str(tmp_path / "ref")]
        + ["--members", str(root / "members.txt"), "--nonmembers", str(root / "nonmembers.txt")]
        + ["--out", str(tmp_path / "out"), "--quiet"]
    )
    _one_line_error(outcome, "reference_dir", "different tokenizer")
    assert not (tmp_path / "out" / "results.json").exists()


def test_hub_name_is_not_downloaded(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_lines(tmp_path / "m.txt", ["a b", "c d"])
    outcome = cli(
        ["run", "--model", "gpt2-org/gpt2-small", "--members", "m.txt", "--nonmembers", "m.txt"]
        + ["--out", "out"]
    )
    _one_line_error(outcome, "hub names are not downloaded", "local directory")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gpt-neox", "opt"])
def test_architectures_load_and_score_like_one_text_at_a_time(arch, tmp_path):
    """Any AutoModelForCausalLM directory: batched, EOS-padded scoring equals scoring each
    text alone; left-padded batched generation equals generating each prompt alone."""
    from privacy_audit.defenses.base import PrivacyClaim, Surface
    from privacy_audit.targets.lm import token_statistics
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    tok = word_tokenizer()
    save(build_causal_lm(arch, len(tok), seed=3, d=32), tok, tmp_path / arch)
    loaded = load_audit_target(tmp_path / arch)
    assert loaded.kind == "causal-lm" and loaded.uninitialized == []
    rel = load_causal_lm_release(loaded, 32, PrivacyClaim.none(), "cpu", batch_size=4)
    assert {Surface.HIDDEN, Surface.GENERATION, Surface.GRADIENTS} <= rel.surfaces
    texts = random_texts(6, 5, length=3) + random_texts(3, 6, length=11)
    stats = rel.token_stats(texts)
    for text, s in zip(texts, stats, strict=True):
        ids, mask = rel.tokenizer.encode([text], 32)
        alone = token_statistics(loaded.model, ids, mask)[0]
        # encoded as tokenizer(text): this tokenizer adds no BOS or EOS, so every word but
        # the first (which nothing precedes) is scored
        assert ids[0].tolist() == tok(text)["input_ids"]
        assert len(s) == len(text.split()) - 1
        np.testing.assert_allclose(s.log_probs, alone.log_probs, atol=1e-5)
        np.testing.assert_allclose(s.mean_log_prob, alone.mean_log_prob, atol=1e-5)
    hidden = rel.hidden(texts)
    assert hidden.shape == (len(texts), loaded.model.config.hidden_size)
    prompts = ["w1 w2", "w3 w4 w5 w6 w7", "w8"]
    together = rel.generate_ids(prompts, max_new_tokens=4)
    alone = [rel.generate_ids([p], max_new_tokens=4)[0] for p in prompts]
    assert together == alone and all(len(g) <= 4 for g in together)
    if arch == "gpt2":  # accelerate's device_map="auto" (all on the CPU here): same numbers
        sharded = load_audit_target(tmp_path / arch, device_map="auto")
        assert sharded.info["device"] == "device_map=auto"
        rel2 = load_causal_lm_release(sharded, 32, PrivacyClaim.none(), "cpu")
        np.testing.assert_allclose(rel2.loss(texts), rel.loss(texts), atol=1e-6)
    grad = rel.gradient_update(texts[:2])
    assert grad.shape == (sum(p.numel() for p in loaded.model.parameters()),)
    assert np.isfinite(grad).all()


def test_texts_are_cut_before_tokenizing_the_whole_text():
    from privacy_audit.targets.scoring import HFTokenizer

    tok = HFTokenizer(word_tokenizer())
    long = " ".join(["w1"] * 200_000)  # 600 kB
    calls = []
    real = tok.hf.__call__

    def spy(text, *a, **k):
        calls.append(len(text))
        return real(text, *a, **k)

    tok.hf.__call__ = spy  # instance attribute: the class's __call__ is what runs
    cut = tok.truncate_text(long, 16)
    assert cut == " ".join(["w1"] * 16)  # 16 tokens: this tokenizer adds no special token
    ids, _ = tok.encode([long], 16)
    assert ids.shape == (1, 16)
    assert tok.char_cap(16) < 1000  # the tokenizer never sees more than this


def test_oom_backoff_halves_the_batch_and_keeps_the_numbers(monkeypatch):
    """A CUDA out-of-memory error (simulated on the CPU) halves the batch; the statistics
    are those of an unbatched run."""
    from privacy_audit.targets import scoring

    tok = word_tokenizer()
    model = build_causal_lm("gpt2", len(tok), seed=1, d=32).eval()
    hf = scoring.HFTokenizer(tok)
    texts = random_texts(7, 9, length=5)
    real_forward = model.forward
    sizes = []

    def forward(*a, **k):
        n = k["input_ids"].shape[0]
        sizes.append(n)
        if n > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_forward(*a, **k)

    monkeypatch.setattr(model, "forward", forward)
    stats, hidden, used = scoring.score_texts(model, hf, texts, 32, batch_size=8)
    assert used == 2 and sizes[:2] == [7, 4] and max(sizes[2:]) == 2
    monkeypatch.setattr(model, "forward", real_forward)
    ref, ref_hidden, _ = scoring.score_texts(model, hf, texts, 32, batch_size=1)
    for a, b in zip(stats, ref, strict=True):
        np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-5)
    np.testing.assert_allclose(hidden, ref_hidden, atol=1e-5)
    # other errors are not retried
    with pytest.raises(ZeroDivisionError):
        scoring.with_oom_backoff(lambda b: 1 / 0, 8)


def test_device_and_dtype_resolution(monkeypatch):
    from privacy_audit.audit.config import parse_config, resolve_device
    from privacy_audit.ground.errors import ConfigError
    from privacy_audit.targets.loading import resolve_dtype

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert parse_config({}).device == "cpu"  # auto
    with pytest.raises(ConfigError, match="device = 'cuda' but this torch build has no CUDA GPU"):
        parse_config({"device": "cuda"})
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda") == "cuda"
    assert resolve_dtype("auto", "cuda") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert resolve_dtype("auto", "cuda") == torch.float16


@pytest.mark.slow
def test_ray_sharded_scoring_equals_local(tmp_path):
    """``--executor ray``: an ActorPool of scoring replicas gives the local numbers."""
    from privacy_audit.audit.own_model import prefill_token_stats
    from privacy_audit.audit.scale.executors import ExecutorSpec
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), seed=2, d=32), tok, tmp_path / "m")
    texts = random_texts(12, 4, length=6) + random_texts(5, 8, length=2)

    def release():
        return load_causal_lm_release(
            load_audit_target(tmp_path / "m"), 32, PrivacyClaim.none(), "cpu", batch_size=4
        )

    local, remote = release(), release()
    assert prefill_token_stats(local, texts) == "local"
    where = prefill_token_stats(
        remote, texts, ExecutorSpec(kind="ray", workers=2, num_cpus=2), progress=False
    )
    assert where == "ray"
    for a, b in zip(local.token_stats(texts), remote.token_stats(texts), strict=True):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.log_probs, b.log_probs, rtol=0, atol=1e-6)
        np.testing.assert_allclose(a.var_log_prob, b.var_log_prob, rtol=0, atol=1e-6)
    np.testing.assert_allclose(local.hidden(texts), remote.hidden(texts), atol=1e-6)


@pytest.mark.slow
def test_privacy_monitor_and_trainer_callback_on_a_causal_lm(tmp_path):
    """PrivacyMonitor / PrivacyAuditCallback on a causal LM: LM attacks by default, texts
    without labels, and the member signal grows as the model memorises the members."""
    from transformers import Trainer, TrainingArguments

    from privacy_audit.audit.integrations.callbacks import PrivacyAuditCallback, PrivacyMonitor

    tok = word_tokenizer()
    members, nonmembers = random_texts(16, 11), random_texts(16, 12)
    model = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    monitor = PrivacyMonitor(model, tok, members, nonmembers, every_n_steps=None, n_boot=100)
    assert monitor.attacks == ("lm-loss", "zlib", "min-k")
    before = monitor.evaluate(0)["privacy/lm-loss/auc"]
    fine_tune(model, tok, members, epochs=25)
    after = monitor.evaluate(1)
    assert after["privacy/lm-loss/auc"] > max(before, 0.9)
    assert after["privacy/max_auc"] >= after["privacy/lm-loss/auc"]

    class Rows(torch.utils.data.Dataset):
        def __init__(self, texts):
            self.enc = [tok(t + tok.eos_token)["input_ids"] for t in texts]

        def __len__(self):
            return len(self.enc)

        def __getitem__(self, i):
            ids = torch.tensor(self.enc[i])
            return {"input_ids": ids, "labels": ids.clone()}

    callback = PrivacyAuditCallback(members, nonmembers, tokenizer=tok, n_boot=100)
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        num_train_epochs=2,
        per_device_train_batch_size=1,
        learning_rate=3e-3,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=build_causal_lm("gpt2", len(tok), seed=0, d=32),
        args=args,
        train_dataset=Rows(members),
        callbacks=[callback],
    )
    trainer.train()
    assert len(callback.history) == 2
    assert all("privacy/min-k/auc" in h for h in callback.history)
    logged = [h for h in trainer.state.log_history if "privacy/lm-loss/auc" in h]
    assert len(logged) == 2 and logged[-1]["epoch"] == pytest.approx(2.0)


def _classifier_data(root: Path) -> tuple[Path, Path]:
    rows = [{"text": t, "label": str(i % 2)} for i, t in enumerate(random_texts(20, 3))]
    m, n = root / "m.jsonl", root / "n.jsonl"
    m.write_text("\n".join(json.dumps(r) for r in rows[:10]), encoding="utf-8")
    n.write_text("\n".join(json.dumps(r) for r in rows[10:]), encoding="utf-8")
    return m, n


def _run_classifier(cli, root, model_key, model_dir, extra=""):
    m, n = _classifier_data(root)
    cfg = root / "c.toml"
    cfg.write_text(
        f'[target]\n{model_key} = "{model_dir}"\n{extra}\n'
        f'[data]\nmembers = "{m}"\nnonmembers = "{n}"\n[metrics]\nbootstrap = 100\n',
        encoding="utf-8",
    )
    out = root / "out"
    return cli(["run", str(cfg), "--out", str(out), "--quiet"]), out


def test_base_encoder_as_a_classifier_is_refused(tmp_path, cli):
    """MiniLM's base encoder has no classification head: exit 2, naming the weights."""
    from privacy_audit.targets.loading import minilm_path

    outcome, out = _run_classifier(cli, tmp_path, "classifier_dir", minilm_path())
    line = _one_line_error(outcome, "classifier.weight", "classifier.bias", "allow_uninitialized")
    assert "random" in line and not out.joinpath("results.json").exists()
    outcome, _ = _run_classifier(cli, tmp_path, "audit_dir", minilm_path())
    _one_line_error(outcome, "set target.kind")  # BertModel: no head, kind unknown


@pytest.mark.slow
def test_gpt2_base_with_a_fresh_classification_head(tmp_path, cli):
    """A GPT-2 LM as a classifier gets a random ``score`` head: exit 2 naming it; with
    ``allow_uninitialized`` the run completes, flagged, red banner, never a clean verdict."""
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), d=32), tok, tmp_path / "gpt2")
    outcome, out = _run_classifier(
        cli, tmp_path, "audit_dir", tmp_path / "gpt2", 'kind = "classifier"'
    )
    _one_line_error(outcome, "score.weight", "allow_uninitialized")
    assert not out.exists() or not any(out.iterdir())
    outcome, out = _run_classifier(
        cli,
        tmp_path,
        "audit_dir",
        tmp_path / "gpt2",
        'kind = "classifier"\nallow_uninitialized = true',
    )
    assert outcome.code == 0, outcome.stderr[-2000:]
    res = _results(out)
    run = res["runs"][0]
    assert run["uninitialized_weights"] == ["score.weight"]
    assert run["target"]["uninitialized_weights"] == ["score.weight"]
    assert run["verdict"]["level"] == "not-measured"
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="uninitialized-weights"' in html and "UNTRAINED WEIGHTS" in html
    # the LM head of the same directory loads fully as a causal LM (tied to the embedding)
    from privacy_audit.targets.loading import load_audit_target

    assert load_audit_target(tmp_path / "gpt2").uninitialized == []


def test_model_dir_causal_lm_under_the_defenses(tmp_path, cli):
    """``model_dir`` at a local causal LM is fine-tuned by the LM defenses; a defense that
    cannot handle the architecture stops at config load with the reason."""
    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.target_resolution import resolve_targets
    from privacy_audit.ground.errors import ConfigError
    from privacy_audit.targets.loading import check_lm_defense

    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), d=32), tok, tmp_path / "gpt2")
    save(build_causal_lm("llama", len(tok), d=32), tok, tmp_path / "llama")
    for d in ("none", "dp-sgd", "phantom-dp-sgd", "dp-blogs"):
        assert check_lm_defense(d, tmp_path / "gpt2") is None, d
    assert "GPT-2" in check_lm_defense("phantom-dp-sgd", tmp_path / "llama")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[target]\nmodel_dir = "llama"\n[[defenses]]\nname = "phantom-dp-sgd"\nepsilon = 8.0\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="cannot fine-tune the causal LM.*phantom clipping"):
        resolve_targets(load_config(cfg))
    outcome = cli(["run", str(cfg), "--out", str(tmp_path / "o"), "--quiet"])
    _one_line_error(outcome, "phantom-dp-sgd", "GPT-2")

    # none on the user's GPT-2, trained by the suite on .txt members (no label column)
    write_lines(tmp_path / "members.txt", random_texts(16, 21))
    write_lines(tmp_path / "nonmembers.txt", random_texts(16, 22))
    cfg.write_text(
        '[target]\nmodel_dir = "gpt2"\nmax_length = 32\n[train]\nepochs = 2\n'
        '[data]\nmembers = "members.txt"\nnonmembers = "nonmembers.txt"\n'
        '[attacks]\nnames = ["lm-loss", "min-k"]\n[metrics]\nbootstrap = 100\n'
        '[[defenses]]\nname = "none"\n',
        encoding="utf-8",
    )
    outcome = cli(["run", str(cfg), "--out", str(tmp_path / "o2"), "--quiet"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = _results(tmp_path / "o2")
    assert res["runs"][0]["utility"]["metric"] == "perplexity"
    assert [a["status"] for a in res["runs"][0]["attacks"]] == ["ok", "ok"]


def test_byo_lm_bench_reports_tokens_per_second_and_the_ratio(tmp_path, cli):
    out = tmp_path / "bench.json"
    outcome = cli(["bench", "byo-lm", "--quick", "--threads", "1", "--out", str(out)])
    assert outcome.code == 0, outcome.stderr[-2000:]
    res = json.loads(out.read_text())["benchmarks"][0]
    setup = res["setup"]
    assert setup["sequences"] == 16 and setup["seq_len"] == 32 and not setup["full_size"]
    assert set(setup["tokens_per_second"]) == {"plain", "suite"}
    assert setup["throughput_ratio_suite_over_plain"] == pytest.approx(
        setup["tokens_per_second"]["suite"] / setup["tokens_per_second"]["plain"]
    )
    assert any("REDUCED SIZE" in n for n in res["notes"])
    bad = cli(["bench", "byo-lm", "--seq-len", "2", "--out", str(out)])
    assert bad.code == 2 and "--seq-len is too small" in bad.stderr


def test_inversion_and_attribute_inference_run_on_a_users_lm(tmp_path):
    """Hidden states of a user's LM: the embedding-inversion attack on its input-embedding
    output and attribute inference on its pooled hidden state run and report CIs."""
    from privacy_audit.attacks import (
        LEAKAGE_ATTACKS,
        AttackContext,
        MetricSettings,
        run_leakage_attack,
    )
    from privacy_audit.defenses.base import Examples, PrivacyClaim
    from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

    tok = word_tokenizer()
    save(build_causal_lm("llama", len(tok), seed=4, d=32), tok, tmp_path / "m")
    rel = load_causal_lm_release(load_audit_target(tmp_path / "m"), 32, PrivacyClaim.none(), "cpu")
    texts = random_texts(40, 13, length=6)
    attrs = ["north" if "w1" in t.split()[0] else "south" for t in texts]
    ex = Examples([f"e{i}" for i in range(40)], texts, np.zeros(40), attributes=attrs)
    ctx = AttackContext(
        ex.subset(range(20)),
        ex.subset(range(20, 30)),
        ex.subset(range(30, 40)),
        None,
        MetricSettings(n_boot=100),
        0,
        {"n_sequences": 8},
    )
    inv = run_leakage_attack(LEAKAGE_ATTACKS["inversion-nn"](n_sequences=8), rel, ctx)
    assert inv.status == "ok", inv.reason
    assert inv.metrics["token_recall"]["value"] == 1.0  # the input embedding is invertible
    att = run_leakage_attack(LEAKAGE_ATTACKS["attribute-inference"](), rel, ctx)
    assert att.status == "ok", att.reason  # runs on the HIDDEN surface
    assert att.headline in att.metrics and att.metrics[att.headline]["ci_low"] is not None
