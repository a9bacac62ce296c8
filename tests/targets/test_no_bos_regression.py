"""Regression (issue 24): a memorising causal LM trained without a BOS token, as GPT-2's
and Pythia's tokenizers encode text, must be audited at its own likelihood.

The suite used to score every text as ``<|endoftext|> tokens <|endoftext|>``: every token
one position later than in training, plus two predictions the model never learned. On
the model below that moved the lm-loss AUC far from the model's own (and would have
turned a HIGH leak into a milder verdict on a model memorising less). Now the suite's
lm-loss AUC must be the AUC of the model's own ``labels=`` loss, and the verdict HIGH.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from tests.own_models import random_texts, save, word_tokenizer, write_lines

N = 60  # members and non-members each
WORDS = 6  # per line: short lines make the two extra predictions weigh


def _train_without_bos(tok, members):
    """A GPT-2 config fine-tuned as a user would: ``tokenizer(text)`` (no BOS, no EOS:
    this tokenizer adds none), ``model(input_ids, labels=input_ids)``, AdamW."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    eos = tok.eos_token_id
    cfg = GPT2Config(
        vocab_size=len(tok), n_embd=64, n_layer=2, n_head=2, n_positions=64,
        bos_token_id=eos, eos_token_id=eos,
    )  # fmt: skip
    model = GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.tensor(tok(members)["input_ids"])  # equal lengths: no padding
    gen = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(4):
        perm = torch.randperm(len(ids), generator=gen)
        for i in range(0, len(ids), 8):
            batch = ids[perm[i : i + 8]]
            loss = model(input_ids=batch, labels=batch).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


@torch.no_grad()
def _own_losses(model, tok, texts) -> np.ndarray:
    out = []
    for t in texts:
        x = torch.tensor([tok(t)["input_ids"]])
        out.append(float(model(input_ids=x, labels=x).loss))
    return np.array(out)


def test_no_bos_model_is_audited_at_its_own_likelihood(tmp_path, cli):
    from sklearn.metrics import roc_auc_score

    tok = word_tokenizer()
    members, nonmembers = random_texts(N, 1, WORDS), random_texts(N, 2, WORDS)
    assert tok(members[0])["input_ids"][0] != tok.bos_token_id  # trained without BOS
    model = _train_without_bos(tok, members)
    save(model, tok, tmp_path / "model")
    own = np.r_[_own_losses(model, tok, members), _own_losses(model, tok, nonmembers)]
    y = np.r_[np.ones(N), np.zeros(N)]
    own_auc = roc_auc_score(y, -own)
    assert own_auc > 0.9  # it memorises its members

    m = write_lines(tmp_path / "members.txt", members)
    n = write_lines(tmp_path / "nonmembers.txt", nonmembers)
    out = tmp_path / "out"
    outcome = cli(
        ["run", "--model", str(tmp_path / "model"), "--members", str(m), "--nonmembers", str(n)]
        + ["--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-2000:]
    run = json.loads((out / "results.json").read_text("utf-8"))["runs"][0]
    loss = next(a for a in run["attacks"] if a["attack"] == "lm-loss")
    auc = loss["metrics"]["auc"]
    suite_auc = auc["value"]
    print(
        f"own labels= loss AUC {own_auc:.4f}; suite lm-loss AUC {suite_auc:.4f} "
        f"[{auc['ci_low']:.4f}, {auc['ci_high']:.4f}], verdict {run['verdict']['level']}"
    )
    assert abs(suite_auc - own_auc) <= 0.01
    assert run["verdict"]["level"] == "high"
    assert run["target"]["encoding"]["first_token"].startswith("not scored: no BOS")
