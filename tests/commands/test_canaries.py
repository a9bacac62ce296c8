"""`privacy-audit canaries make | audit` end to end on a pipeline the suite does not run:
a user's tokenizer and a small GPT-2 from a config, trained by a plain torch loop
(non-private) and by Opacus DP-SGD, as a user would."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from privacy_audit import fixtures
from privacy_audit.audit.cli import main

TEXTS = [r["text"] for r in fixtures.load_corpus("private")[:160]]


def _tokenizer(texts, path: Path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for t in texts for w in t.lower().split()})
    vocab = {w: i for i, w in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    fast.save_pretrained(str(path))


def _user_training(lines, tok_dir, model_dir, dp_sigma=None, init_dir=None):
    """What a user's script does: tokenize, build GPT-2 from a config, train, save
    (``init_dir``: also the model before training, the audit's reference)."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=48,
        n_layer=1,
        n_head=2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=dp_sigma is None,
    )
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg)
    if init_dir is not None:
        model.save_pretrained(str(init_dir))
        tok.save_pretrained(str(init_dir))
    enc = [
        [
            tok.bos_token_id,
            *tok(t.lower(), add_special_tokens=False)["input_ids"][:60],
            tok.eos_token_id,
        ]
        for t in lines
    ]
    width = max(len(e) for e in enc)
    ids = torch.full((len(enc), width), tok.pad_token_id)
    for i, e in enumerate(enc):
        ids[i, : len(e)] = torch.tensor(e)
    labels = ids.masked_fill(ids == tok.pad_token_id, -100)
    data = torch.utils.data.TensorDataset(ids, labels)
    loader = torch.utils.data.DataLoader(
        data, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    epochs = 12
    eps = None
    if dp_sigma is not None:
        from opacus import PrivacyEngine

        engine = PrivacyEngine(accountant="prv")
        model, opt, loader = engine.make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=dp_sigma,
            max_grad_norm=1.0,
            poisson_sampling=True,
        )
    model.train()
    for _ in range(epochs):
        for x, y in loader:
            if len(x) == 0:
                continue
            opt.zero_grad()
            pos = torch.arange(x.shape[1]).expand_as(x)  # per-sample positions for Opacus
            logits = model(
                input_ids=x, attention_mask=(x != tok.pad_token_id).long(), position_ids=pos
            ).logits
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]),
                y[:, 1:].reshape(-1),
                ignore_index=-100,
            )
            loss.backward()
            opt.step()
    if dp_sigma is not None:
        eps = engine.get_epsilon(1e-5)
        model = model._module
    model.save_pretrained(str(model_dir))
    tok.save_pretrained(str(model_dir))
    return eps


@pytest.mark.slow
def test_make_train_audit_end_to_end(tmp_path):
    tok_dir, can_dir = tmp_path / "tok", tmp_path / "canaries"
    _tokenizer(TEXTS, tok_dir)
    data = tmp_path / "data.txt"
    data.write_text("\n".join(TEXTS) + "\n")
    assert (
        main(
            [
                "canaries",
                "make",
                "--design",
                "new-token",
                "--n",
                "100",
                "--tokenizer",
                str(tok_dir),
                "--data",
                str(data),
                "--out",
                str(can_dir),
                "--secret-tokens",
                "4",
            ]
        )
        == 0
    )
    assert (can_dir / "inclusion.secret.json").stat().st_mode & 0o077 == 0
    canary_lines = (can_dir / "train_canaries.txt").read_text().splitlines()
    included = json.loads((can_dir / "inclusion.secret.json").read_text())["included"]
    assert len(canary_lines) == sum(included) and 30 <= sum(included) <= 70
    # the user mixes the canaries into their text and trains
    lines = TEXTS + canary_lines
    results = {}
    for name, sigma in (("plain", None), ("dp", 1.0)):
        model_dir = tmp_path / name
        init = tmp_path / f"init-{name}"
        eps = _user_training(lines, can_dir / "tokenizer", model_dir, sigma, init)
        claim = ["--claimed-epsilon", f"{eps:.6f}", "--claimed-delta", "1e-5"] if eps else []
        # raw scores, then calibrated by the model before training (--reference)
        for tag, ref in (("", []), ("-ref", ["--reference", str(init)])):
            out = tmp_path / f"audit-{name}{tag}"
            assert (
                main(
                    [
                        "canaries",
                        "audit",
                        "--model",
                        str(model_dir),
                        "--canaries",
                        str(can_dir),
                        "--out",
                        str(out),
                        "--aggregate-only",
                        "--quiet",
                        *claim,
                        *ref,
                    ]
                )
                == 0
            )
            res = json.loads((out / "results.json").read_text())
            assert res["score"] == ("calibrated by the reference" if ref else "raw")
            results[name + tag] = (res, eps)
            text = (out / "results.json").read_text() + (out / "report.html").read_text()
            # no inclusion record, canary id or canary text in what the audit writes
            record = json.loads((can_dir / "canaries.json").read_text())["canaries"]
            assert "included" not in text and "canary-0" not in text
            assert not any(c["text"] in text for c in record)
            assert res["aggregate_only"] is True
    for tag in ("", "-ref"):
        plain, _ = results["plain" + tag]
        assert plain["epsilon_lb"] > 0.5 and plain["tpr_at_1pct_fpr"] >= 0.5
        assert plain["claim_status"] == "no-claim"
        dp, eps = results["dp" + tag]
        assert math.isfinite(eps) and 0 <= dp["epsilon_lb"] <= eps
        assert dp["claim_status"] in ("consistent", "untestable")
    # a missing reference: one line, exit 2, nothing written
    bad = tmp_path / "audit-bad-ref"
    argv = ["canaries", "audit", "--model", str(tmp_path / "dp"), "--canaries", str(can_dir)]
    assert main([*argv, "--out", str(bad), "--reference", str(tmp_path / "nope")]) == 2
    assert not bad.exists()
    # an audit already in --out is a record: refused, untouched, unless --force
    done = tmp_path / "audit-dp"
    before = (done / "results.json").read_bytes()
    assert main([*argv, "--out", str(done), "--quiet"]) == 2
    assert (done / "results.json").read_bytes() == before
    assert main([*argv, "--out", str(done), "--quiet", "--force"]) == 0


def test_bad_inputs_are_one_line_exit_2(tmp_path, capsys):
    assert (
        main(
            [
                "canaries",
                "make",
                "--design",
                "emoji",
                "--tokenizer",
                str(tmp_path),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert (
        main(
            [
                "canaries",
                "make",
                "--design",
                "new-token",
                "--tokenizer",
                "gpt2",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert (
        main(["canaries", "audit", "--model", "org/some-hub-model", "--canaries", str(tmp_path)])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("privacy-audit: error:") for e in err)
    assert not (tmp_path / "o").exists()


def test_tampered_inclusion_record_is_refused(tmp_path):
    tok_dir, can_dir = tmp_path / "tok", tmp_path / "c"
    _tokenizer(TEXTS, tok_dir)
    assert (
        main(
            [
                "canaries",
                "make",
                "--design",
                "random-token",
                "--n",
                "40",
                "--tokenizer",
                str(tok_dir),
                "--out",
                str(can_dir),
            ]
        )
        == 0
    )
    rec = can_dir / "canaries.json"
    rec.write_text(rec.read_text().replace('"n": 40', '"n": 41'))
    from privacy_audit.audit.epsilon.pipeline import load_canaries
    from privacy_audit.ground.errors import AuditError

    with pytest.raises(AuditError, match="does not belong"):
        load_canaries(can_dir)
    assert np.all(
        np.isin(json.loads((can_dir / "inclusion.secret.json").read_text())["included"], (0, 1))
    )


def test_a_violated_canary_audit_says_where_to_look_and_untestable_what_would_help():
    from privacy_audit.audit.epsilon.input_canaries import CanarySet
    from privacy_audit.audit.epsilon.pipeline import audit_scores
    from privacy_audit.defenses.base import Examples

    n = 200
    inc = np.r_[np.ones(n // 2, dtype=np.int64), np.zeros(n // 2, dtype=np.int64)]
    ex = Examples([f"c{i}" for i in range(n)], [f"t{i}" for i in range(n)], np.zeros(n))
    cs = CanarySet(ex, inc, "random-token", [""] * n, 1)
    scores = inc + np.random.default_rng(0).normal(0, 0.01, n)  # a perfect separation
    v = audit_scores(scores, cs, 1e-5, 0.95, claimed=1.0)
    assert v["claim_status"] == "VIOLATED"
    assert "noise scale" in v["where_to_look"] and "dp-check" in v["where_to_look"]
    u = audit_scores(scores, cs, 1e-5, 0.95, claimed=8.0)
    assert u["claim_status"] == "untestable"
    assert f"with {n} canaries the most any outcome could certify is ε = 3.14" in u["where_to_look"]
    assert "grows with the number of canaries" in u["where_to_look"]
    assert audit_scores(scores, cs, 1e-5, 0.95, claimed=None)["where_to_look"] == ""
