"""Known-answer tests: a user's causal LM is scored on exactly the tokens and positions
``tokenizer(text)`` gives it (issue 24).

One tokenizer per family, built in memory with ``tokenizers`` (a BPE trained on stdlib
prose) and configured like the family's own: GPT-2 and GPT-NeoX (byte-level, no BOS
added), Llama (Metaspace, ``<s>`` added), OPT (byte-level, ``</s>`` added in front); and a
tiny model of that architecture from a config. The reference is independent of the
suite: the log-softmax of plain ``model(**tokenizer(text, truncation=True,
max_length=L, return_tensors="pt")).logits`` and Hugging Face's own ``labels=`` loss.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

FAMILIES = ("gpt2", "llama", "gpt-neox", "opt")
L = 24  # max_length: several texts below are longer and get cut
ATOL = 1e-5


def _corpus() -> list[str]:
    from pydoc_data.topics import topics

    lines = []
    for key in sorted(topics)[:40]:
        lines += [ln.strip() for ln in topics[key].splitlines() if len(ln.split()) >= 4]
    return lines


def _texts() -> list[str]:
    lines = _corpus()
    short = [" ".join(ln.split()[:n]) for ln, n in zip(lines[:6], (1, 2, 3, 5, 8, 4), strict=True)]
    return short + lines[100:106] + [" ".join(lines[200:204])]  # the last ones exceed L


@functools.cache
def family(name: str):
    """``(hf_tokenizer, model)`` of a family, configured like its real tokenizer."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    byte_level = name != "llama"
    specials = {
        "gpt2": ["<|endoftext|>"],
        "gpt-neox": ["<|endoftext|>", "<|padding|>"],
        "llama": ["<unk>", "<s>", "</s>"],
        "opt": ["<s>", "<pad>", "</s>", "<unk>"],
    }[name]
    tok = Tokenizer(models.BPE(unk_token=None if byte_level else "<unk>"))
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
        alphabet = []
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(_corpus(), trainer)
    if name in ("gpt2", "gpt-neox"):  # no special token added (GPT-2, Pythia)
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        hf = tf.PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<|endoftext|>",
            eos_token="<|endoftext|>",
            unk_token="<|endoftext|>",
        )
        bos = eos = hf.eos_token_id
        pad = None
    elif name == "llama":  # <s> in front, as LlamaTokenizerFast (add_bos_token=True)
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
        )
        hf = tf.PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
        )
        bos, eos, pad = 1, 2, None
    else:  # OPT: its BOS is </s>, added in front
        tok.post_processor = processors.TemplateProcessing(
            single="</s> $A", pair="</s> $A </s> $B", special_tokens=[("</s>", 2)]
        )
        hf = tf.PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="</s>",
            eos_token="</s>",
            pad_token="<pad>",
            unk_token="<unk>",
        )
        bos, eos, pad = 2, 2, 1
    torch.manual_seed(0)
    common = dict(
        vocab_size=len(hf), bos_token_id=bos, eos_token_id=eos, pad_token_id=pad
    )  # a larger init than usual: position shifts move the log-probs visibly
    if name == "gpt2":
        cfg = tf.GPT2Config(
            n_embd=32, n_layer=2, n_head=2, n_positions=64, initializer_range=0.2, **common
        )
        model = tf.GPT2LMHeadModel(cfg)
    elif name == "llama":
        cfg = tf.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=64,
            initializer_range=0.2,
            **common,
        )
        model = tf.LlamaForCausalLM(cfg)
    elif name == "gpt-neox":
        cfg = tf.GPTNeoXConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=64,
            initializer_range=0.2,
            **common,
        )
        model = tf.GPTNeoXForCausalLM(cfg)
    else:
        cfg = tf.OPTConfig(
            hidden_size=32,
            ffn_dim=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
            init_std=0.2,
            **common,
        )
        model = tf.OPTForCausalLM(cfg)
    return hf, model.eval()


def _release(name: str, batch_size: int, **enc):
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.targets.scoring import HFLMRelease, HFTokenizer

    hf, model = family(name)
    return HFLMRelease(model, HFTokenizer(hf, **enc), L, PrivacyClaim.none(), batch_size=batch_size)


@torch.no_grad()
def _plain_log_probs(model, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Targets and log p(target) at every predicted position, from plain ``model(...)``."""
    x = torch.tensor([ids])
    logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0].double()
    lp = torch.log_softmax(logits[:-1], -1).gather(-1, x[0, 1:, None])[:, 0]
    return x[0, 1:].numpy(), lp.numpy()


@pytest.mark.parametrize("name", FAMILIES)
def test_encoding_is_tokenizer_of_text_cut_as_hf_truncation(name):
    from privacy_audit.targets.scoring import HFTokenizer

    hf, _ = family(name)
    tok = HFTokenizer(hf)
    texts = _texts()
    cut_any = False
    for text in texts:
        want = hf(text, truncation=True, max_length=L)["input_ids"]
        assert tok.row(text, L) == want
        first = want[0]
        if name in ("gpt2", "gpt-neox"):  # nothing in front: the text's own first token
            assert (
                want
                == hf(text, add_special_tokens=False, truncation=True, max_length=L)["input_ids"]
            )
        else:
            assert first == hf.bos_token_id  # <s> (Llama), </s> (OPT)
        cut = tok.truncate_text(text, L)
        assert text.startswith(cut)
        if cut != text:
            cut_any = True
            assert hf(cut)["input_ids"] == want  # the cut text encodes to the same ids
            assert len(want) == L
    assert cut_any
    conv = tok.convention()
    if name in ("gpt2", "gpt-neox"):
        assert conv["first_token"].startswith("not scored: no BOS")
    else:
        assert conv["first_token"] == f"scored after {hf.bos_token}"


@pytest.mark.parametrize("batch_size", [1, 4])  # one at a time; batched with padding
@pytest.mark.parametrize("name", FAMILIES)
def test_per_token_log_probs_equal_plain_forward(name, batch_size):
    hf, model = family(name)
    texts = _texts()
    rel = _release(name, batch_size)
    stats = rel.token_stats(texts)
    lengths = set()
    for text, s in zip(texts, stats, strict=True):
        ids = hf(text, truncation=True, max_length=L)["input_ids"]
        lengths.add(len(ids))
        tgt, lp = _plain_log_probs(model, ids)
        np.testing.assert_array_equal(s.token_ids, tgt)
        np.testing.assert_allclose(s.log_probs, lp, atol=ATOL, rtol=0)
        # the scored text (cut once for zlib and the other signals) scores the same
        cut = rel.tokenizer.truncate_text(text, L)
        if cut != text:
            np.testing.assert_allclose(rel.token_stats([cut])[0].log_probs, lp, atol=ATOL, rtol=0)
    assert len(lengths) > 2 and L in lengths  # padding happened, and texts were cut


@pytest.mark.parametrize("name", FAMILIES)
def test_lm_loss_equals_hf_labels_loss(name):
    from privacy_audit.attacks.llm_membership import LMLossAttack
    from privacy_audit.defenses.base import Examples

    hf, model = family(name)
    texts = [t for t in _texts() if len(hf(t, truncation=True, max_length=L)["input_ids"]) >= 2]
    ex = Examples(ids=[str(i) for i in range(len(texts))], texts=texts, labels=[0] * len(texts))
    got = LMLossAttack().score(_release(name, 4), ex)
    want = []
    with torch.no_grad():
        for t in texts:
            enc = hf(t, truncation=True, max_length=L, return_tensors="pt")
            want.append(-float(model(**enc, labels=enc["input_ids"]).loss))
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("name", "add_bos", "add_eos"),
    [
        ("gpt2", True, False),
        ("gpt-neox", True, True),
        ("llama", False, False),
        ("opt", "auto", True),
    ],
)
def test_add_bos_add_eos_override_the_tokenizer(name, add_bos, add_eos):
    """For a model trained with another convention: the rows are the tokenizer's tokens
    (cut to leave room) with BOS put in front / taken away and EOS appended."""
    hf, model = family(name)
    rel = _release(name, 4, add_bos=add_bos, add_eos=add_eos)
    texts = _texts()
    stats = rel.token_stats(texts)
    bos = hf.bos_token_id
    for text, s in zip(texts, stats, strict=True):
        own_front = name in ("llama", "opt")
        front = own_front if add_bos == "auto" else add_bos
        room = L - int(front) - int(add_eos)
        body = hf(text, add_special_tokens=False, truncation=True, max_length=room)["input_ids"]
        ids = [bos] * int(front) + body + [hf.eos_token_id] * int(add_eos)
        assert rel.tokenizer.row(text, L) == ids
        tgt, lp = _plain_log_probs(model, ids)
        np.testing.assert_array_equal(s.token_ids, tgt)
        np.testing.assert_allclose(s.log_probs, lp, atol=ATOL, rtol=0)
    assert rel.encoding()["encoding"] == "tokenizer(text) with add_bos / add_eos changed" or (
        name == "opt" and not add_eos
    )


def test_bad_add_bos_is_refused():
    from privacy_audit.targets.scoring import HFTokenizer

    hf, _ = family("gpt2")
    with pytest.raises(ValueError, match="add_bos"):
        HFTokenizer(hf, add_bos="yes")
    with pytest.raises(ValueError, match="add_eos"):
        HFTokenizer(hf, add_eos="auto")


def test_config_add_bos_add_eos_and_the_max_length_default():
    from privacy_audit.audit.config import MAX_LENGTH_CAP, TRAIN_MAX_LENGTH, parse_config
    from privacy_audit.ground.errors import ConfigError

    data = {"members": "m.txt", "nonmembers": "n.txt"}
    cfg = parse_config({"target": {"audit_dir": "model"}, "data": data})
    assert cfg.target.max_length == MAX_LENGTH_CAP and cfg.audit["max_length_auto"]
    assert cfg.audit["add_bos"] == "auto" and cfg.audit["add_eos"] is False
    cfg = parse_config({"target": {"audit_dir": "model", "max_length": 40}, "data": data})
    assert cfg.target.max_length == 40 and not cfg.audit["max_length_auto"]
    assert parse_config({}).target.max_length == TRAIN_MAX_LENGTH  # the suite's own training
    for ok in (True, False, "auto"):
        t = {"audit_dir": "model", "add_bos": ok, "add_eos": True}
        assert parse_config({"target": t, "data": data}).audit["add_bos"] == ok
    for key, bad in (("add_bos", "yes"), ("add_bos", 1), ("add_eos", "auto"), ("add_eos", 0)):
        with pytest.raises(ConfigError, match=f"'target.{key}'"):
            parse_config({"target": {"audit_dir": "model", key: bad}, "data": data})
    for key, value in (("add_bos", True), ("add_eos", True)):  # the suite trains: no effect
        with pytest.raises(ConfigError, match="applies only when auditing a trained model"):
            parse_config({"target": {key: value}})


def test_bad_add_bos_in_a_config_is_one_line_and_exit_2(tmp_path, cli):
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        '[target]\naudit_dir = "m"\nadd_bos = "sometimes"\n'
        '[data]\nmembers = "a.txt"\nnonmembers = "b.txt"\n',
        encoding="utf-8",
    )
    outcome = cli(["run", str(cfg), "--out", str(tmp_path / "out"), "--quiet"])
    assert outcome.code == 2
    lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "target.add_bos" in lines[0], outcome.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flag", "want"), [([], "auto"), (["--add-bos"], True), (["--no-add-bos"], False)]
)
def test_one_liner_add_bos_flags(flag, want, tmp_path, monkeypatch):
    from privacy_audit.audit.integrations.cli import build_parser, one_line_config

    monkeypatch.chdir(tmp_path)  # the data files are checked as the flags name them
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("some text\n", encoding="utf-8")

    args = build_parser().parse_args(
        ["run", "--model", "m", "--members", "a.txt", "--nonmembers", "b.txt", *flag]
    )
    assert one_line_config(args).audit["add_bos"] == want


def test_max_length_follows_the_model_context():
    from privacy_audit.audit.own_model import resolve_max_length

    _, model = family("gpt2")  # n_positions = 64
    assert resolve_max_length(model, 512) == 64
    assert resolve_max_length(model, 40) == 40


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_canary_positions_follow_the_encoding(name):
    """LM canaries read log p of the text's own token j at entry j (NaN where nothing
    precedes it): through the release's scores and through the plain HF scorer."""
    from privacy_audit.audit.epsilon.lm_canaries import TokenView, hf_token_log_probs

    hf, model = family(name)
    rel = _release(name, 4)
    texts = [t for t in _texts() if 2 < len(hf(t)["input_ids"]) <= L]  # not cut
    assert len(texts) >= 4
    view = TokenView(rel.tokenizer)
    plain_rows = hf_token_log_probs(model, hf, texts)
    for text, s, plain in zip(texts, rel.token_stats(texts), plain_rows, strict=True):
        own = hf(text, add_special_tokens=False)["input_ids"]
        full = hf(text)["input_ids"]
        lead = len(full) - len(own)
        _, lp = _plain_log_probs(model, full)  # lp[k] = log p(full[k + 1])
        want = np.array([np.nan if j + lead == 0 else lp[j + lead - 1] for j in range(len(own))])
        np.testing.assert_allclose(view.aligned(s.log_probs), want, atol=ATOL, rtol=0)
        np.testing.assert_allclose(plain, want, atol=ATOL, rtol=0)
