"""The small causal language-model target: GPT-2 built from a config, tied embeddings.

Shared generative target of the suite (phantom-dp-sgd / re-attention, dp-blogs, extraction
attacks). Nothing is downloaded: the model is a ``transformers`` ``GPT2LMHeadModel`` built
from a ``GPT2Config`` with random initialisation, and the tokenizers are built here.

Presets (``[target] preset``):

- ``tiny-gpt2``: character-level (the paper's own LM experiment is character-level),
  2 blocks, d = 64, 2 heads, context 512, input/output embeddings tied. The alphabet is
  fixed printable ASCII, so the vocabulary depends on no data and any canary secret is
  representable exactly.
- ``tiny-gpt2-word``: the same network over a word-level vocabulary built from the
  fixture corpus's *public* split only (so the vocabulary reveals nothing about members),
  lowercased, with every digit and printable punctuation mark as its own token; unseen
  words map to ``<unk>``.

Conventions used by every function here: right padding with ``pad_id``; each encoded
text is ``<bos> tokens <eos>`` (prompts for generation omit ``<eos>``); the per-sequence
loss is the **mean next-token cross-entropy over the non-padding positions** (labels are
the inputs shifted by one), which is what the DP engines clip per sample.
"""

from __future__ import annotations

import math
import re
import string
import time
from typing import Any

import numpy as np
import torch

from privacy_audit.defenses.base import Examples, PrivacyClaim, ReleasedModel, Surface, TokenStats

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD, BOS, EOS, UNK = range(4)

from privacy_audit.targets.presets import LM_PRESETS  # noqa: E402 - torch-free

WORD_RE = re.compile(r"[a-z]+|[0-9]|[^\sa-z0-9]")


class LMTokenizer:
    """Character- or word-level tokenizer with ``<pad> <bos> <eos> <unk>`` at ids 0–3."""

    def __init__(self, tokens: list[str], kind: str) -> None:
        if kind not in ("char", "word"):
            raise ValueError(f"unknown tokenizer kind {kind!r}; allowed: char, word")
        self.kind = kind
        self.vocab = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.index = {t: i for i, t in enumerate(self.vocab)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = PAD, BOS, EOS, UNK

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        if self.kind == "char":
            return list(text)
        return WORD_RE.findall(text.lower())

    def token_ids(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens."""
        return [self.index.get(t, UNK) for t in self.tokenize(text)]

    def encode(
        self, texts: list[str], max_length: int, add_eos: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)``, shape [n, L] with L the longest encoded text
        (at most ``max_length``), right-padded. Each row is ``<bos> tokens [<eos>]``;
        a text longer than ``max_length`` is truncated (its ``<eos>`` then dropped)."""
        if max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {max_length}")
        rows = []
        for text in texts:
            ids = [BOS, *self.token_ids(text)] + ([EOS] if add_eos else [])
            rows.append(ids[:max_length])
        longest = max((len(r) for r in rows), default=1)
        out = torch.full((len(rows), longest), PAD, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        return out, mask

    def decode(self, ids) -> str:
        """Text of ``ids``; special tokens are dropped (``<unk>`` is kept visibly)."""
        toks = [
            self.vocab[int(i)] for i in ids if int(i) not in (PAD, BOS, EOS) and int(i) < len(self)
        ]
        if self.kind == "char":
            return "".join(toks)
        text = ""
        for t in toks:
            glue = (
                t in string.punctuation and t not in "$@(" or (t.isdigit() and text[-1:].isdigit())
            )
            text += t if (not text or glue) else " " + t
        return text


def char_tokenizer() -> LMTokenizer:
    """Fixed printable-ASCII alphabet (data-independent)."""
    return LMTokenizer([c for c in string.printable if c.isprintable()], "char")


def word_tokenizer(public_texts: list[str] | None = None) -> LMTokenizer:
    """Words of ``public_texts`` (default: the fixture corpus's public split), plus every
    digit and punctuation mark, in first-seen order (deterministic)."""
    if public_texts is None:
        from privacy_audit import fixtures

        public_texts = [r["text"] for r in fixtures.load_corpus("public")]
    seen: dict[str, None] = {c: None for c in string.digits + string.punctuation}
    for text in public_texts:
        for t in WORD_RE.findall(text.lower()):
            seen.setdefault(t, None)
    return LMTokenizer(list(seen), "word")


def build_tokenizer(kind: str = "char") -> LMTokenizer:
    if kind == "char":
        return char_tokenizer()
    if kind == "word":
        return word_tokenizer()
    raise ValueError(f"unknown tokenizer kind {kind!r}; allowed: char, word")


def build_lm(
    vocab_size: int,
    seed: int = 0,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    n_positions: int = 512,
    tie: bool = True,
    dropout: float = 0.0,
    activation: str = "gelu_new",
):
    """A randomly initialised ``GPT2LMHeadModel`` (eager attention, tied embeddings by
    default; ``tie=False`` gives an independent output matrix, e.g. for Opacus)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        activation_function=activation,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
        tie_word_embeddings=tie,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    if not tie:  # transformers may tie anyway at init; make the head an independent copy
        head = model.lm_head
        if head.weight is model.transformer.wte.weight:
            head.weight = torch.nn.Parameter(model.transformer.wte.weight.detach().clone())
    return model


def build_lm_target(preset: str, seed: int = 0, **overrides):
    """``(model, tokenizer)`` for an LM preset name (see :data:`LM_PRESETS`)."""
    if preset not in LM_PRESETS:
        raise ValueError(f"unknown LM preset {preset!r}; allowed: {', '.join(LM_PRESETS)}")
    spec = {**LM_PRESETS[preset], **overrides}
    tokenizer = build_tokenizer(spec.pop("tokenizer"))
    return build_lm(tokenizer.vocab_size, seed=seed, **spec), tokenizer


def is_tied(model) -> bool:
    """True when the LM head's weight is the input embedding (same storage)."""
    head = model.get_output_embeddings()
    return head is not None and head.weight is model.get_input_embeddings().weight


def is_lm_target(target) -> bool:
    """Whether a defense's ``target`` (``privacy_audit.targets.loading.Target``) is an LM preset."""
    spec = getattr(target, "spec", None)
    if hasattr(spec, "is_causal_lm"):
        return bool(spec.is_causal_lm)  # an LM preset or a user's local causal LM
    return getattr(spec, "preset", None) in LM_PRESETS and not getattr(spec, "model_dir", None)


def context_length(model) -> int:
    """Longest sequence the model takes (GPT-2 ``n_positions``, Llama / GPT-NeoX / OPT
    ``max_position_embeddings``)."""
    cfg = model.config
    for key in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(f"cannot tell the context length of {type(model).__name__} from its config")


def check_context(model, input_ids: torch.Tensor) -> None:
    """ValueError when a batch is longer than the model's context."""
    n = context_length(model)
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape [batch, length], got {tuple(input_ids.shape)}")
    if input_ids.shape[1] > n:
        raise ValueError(
            f"sequences of length {input_ids.shape[1]} exceed the model's context length {n}; "
            f"truncate them to at most {n} tokens"
        )


def token_nll(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position next-token NLL [B, L-1] (0 where the target is padding) and the
    float mask of valid target positions [B, L-1]."""
    check_context(model, input_ids)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    targets = input_ids[:, 1:]
    valid = attention_mask[:, 1:].to(logits.dtype)
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view_as(targets)
    return nll * valid, valid


def token_statistics(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> list[TokenStats]:
    """One forward pass -> :class:`TokenStats` per row (float64 arrays, padding removed;
    computed in the logits' dtype, see :func:`token_statistics_from_logits`).

    log p(x_t|x_<t) is the log-softmax at the target; mu_t and sigma_t^2 are the mean and
    variance of log p(z|x_<t) under z ~ p(.|x_<t), computed from the same logits.
    """
    check_context(model, input_ids)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    return token_statistics_from_logits(logits, input_ids, attention_mask)


def token_statistics_from_logits(
    logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> list[TokenStats]:
    """:func:`token_statistics` from a forward pass's logits [B, L, V] (so a caller that
    also wants hidden states from the same pass need not run the model again).

    Row by row, valid positions only, through
    :func:`~privacy_audit.targets.logit_stats.position_statistics`: log p, the
    mean and variance of log p over the vocabulary and the top-1 token in one blocked sweep
    in the logits' dtype (float32; bf16 / fp16 upcast to float32 per block; float64 stays
    float64), sums over the vocabulary as float32 sums of 64 entries added in float64, T
    values kept per text. Its module states the error bound against float64 (log p within
    u (65 + log V), u = 2^-24)."""
    from privacy_audit.targets.logit_stats import position_statistics

    targets = input_ids[:, 1:]
    valid = attention_mask[:, 1:].bool()
    out = []
    for i in range(len(input_ids)):
        v = valid[i]
        n = int(v.sum())
        rows = logits[i, :n] if bool(v[:n].all()) else logits[i, :-1][v]  # right padding: a view
        tgt = targets[i][v]
        lp, mu, var, top1 = position_statistics(rows.detach(), tgt)
        out.append(
            TokenStats(
                token_ids=tgt.cpu().numpy(),
                log_probs=lp.cpu().numpy(),
                mean_log_prob=mu.cpu().numpy(),
                var_log_prob=var.cpu().numpy(),
                top1_ids=top1.cpu().numpy(),  # the model's top-1 token (ez-mia's error zone)
            )
        )
    return out


def sequence_loss(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-sequence mean next-token cross-entropy over non-padding positions, shape [B]."""
    nll, valid = token_nll(model, input_ids, attention_mask)
    return nll.sum(1) / valid.sum(1).clamp(min=1)


# --------------------------------------------------------------------------- #
# non-private training
# --------------------------------------------------------------------------- #
def training_tensors(model, tokenizer, texts: list[str], max_length: int, device):
    """``(device, input_ids, attention_mask)`` for training ``model`` on ``texts``: the model
    moved to the resolved device in train mode, the texts encoded to at most ``max_length``
    tokens and never past the model's context length. Private and non-private training
    share it so that both see exactly the same sequences."""
    from privacy_audit.targets.classifier import resolve_device

    dev = resolve_device(device)
    model.to(dev).train()
    ids, mask = tokenizer.encode(texts, min(max_length, context_length(model)))
    return dev, ids, mask


def train_lm(
    model,
    tokenizer: LMTokenizer,
    texts: list[str],
    epochs: int,
    batch_size: int,
    learning_rate: float,
    max_length: int,
    weight_decay: float = 0.0,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
    desc: str = "train lm",
) -> dict[str, Any]:
    """Plain (non-private) AdamW training on ``texts`` with shuffled minibatches."""
    dev, ids, mask = training_tensors(model, tokenizer, texts, max_length, device)
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    g = torch.Generator().manual_seed(seed)
    n = len(texts)
    steps, last, start = 0, math.nan, time.perf_counter()
    from privacy_audit.ground.progress import progress_bar

    bar = progress_bar(epochs * math.ceil(n / batch_size), desc, progress, epochs)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g)
        running, count = 0.0, 0
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            b_ids, b_mask = trim(ids[idx], mask[idx])
            b_ids, b_mask = b_ids.to(dev), b_mask.to(dev)
            opt.zero_grad(set_to_none=True)
            loss = sequence_loss(model, b_ids, b_mask).mean()
            loss.backward()
            opt.step()
            running += float(loss.detach()) * len(idx)
            count += len(idx)
            steps += 1
            bar.update(1)
        last = running / max(count, 1)
    bar.close()
    return {
        "epochs": epochs,
        "steps": steps,
        "final_train_loss": last,
        "seconds": time.perf_counter() - start,
    }


def trim(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop padding columns beyond the longest row."""
    longest = max(int(mask.sum(1).max()), 1) if len(mask) else 1
    return ids[:, :longest], mask[:, :longest]


# --------------------------------------------------------------------------- #
# the released LM
# --------------------------------------------------------------------------- #
class LMRelease(ReleasedModel):
    """A trained causal LM as an adversary sees it.

    Surfaces:
    - ``loss``: per-sequence mean next-token NLL (labels are ignored: the text is its own
      target); :meth:`token_losses` / :meth:`token_log_probs` give it per token;
    - ``probabilities``: the next-token distribution after each text, shape (n, V);
    - ``generation``: continuations of prompts (greedy by default, or sampled);
    - ``gradients``: the update the training mechanism releases for a batch.
    Utility is perplexity on held-out text (lower is better), with a bootstrap CI.
    """

    surfaces = frozenset(
        {Surface.PROBABILITIES, Surface.LOSS, Surface.GENERATION, Surface.GRADIENTS}
    )

    def __init__(
        self,
        model,
        tokenizer: LMTokenizer,
        max_length: int,
        claim: PrivacyClaim,
        device: str = "cpu",
        gradient_mechanism=None,
        schedule=None,
        batch_size: int = 64,
        label_names: list[str] | None = None,
    ) -> None:
        from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism
        from privacy_audit.targets.classifier import resolve_device

        self.model = model
        self.tokenizer = tokenizer
        self.max_length = min(int(max_length), context_length(model))
        self.claim = claim
        self.device = resolve_device(device)
        self.gradient_mechanism = gradient_mechanism or GaussianGradientMechanism(None)
        self.schedule = schedule
        self.batch_size = batch_size
        self.label_names = list(label_names or [])
        self.model.to(self.device).eval()

    # -- encoding --------------------------------------------------------------
    def encode(self, texts: list[str], add_eos: bool = True):
        return self.tokenizer.encode(list(texts), self.max_length, add_eos=add_eos)

    def decode(self, ids) -> str:
        return self.tokenizer.decode(ids)

    # -- scoring surfaces ------------------------------------------------------
    @torch.no_grad()
    def token_stats(self, texts: list[str]) -> list[TokenStats]:
        """:class:`TokenStats` per text. Each distinct text is run through the model once
        per release: every LM signal (loss, zlib, min-k, min-k++, ...) reads this cache."""
        cache = self.__dict__.setdefault("_token_stats_cache", {})
        todo = list(dict.fromkeys(t for t in texts if t not in cache))
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i : i + self.batch_size]
            ids, mask = self.encode(chunk)
            rows = token_statistics(self.model, ids.to(self.device), mask.to(self.device))
            cache.update(zip(chunk, rows, strict=True))
        return [cache[t] for t in texts]

    def _token_nll(self, texts: list[str]) -> list[np.ndarray]:
        return [s.nll for s in self.token_stats(list(texts))]

    def token_losses(self, texts: list[str]) -> list[np.ndarray]:
        """Next-token NLL of every predicted token (including ``<eos>``), one array per text."""
        return self._token_nll(list(texts))

    def token_log_probs(self, texts: list[str]) -> list[np.ndarray]:
        """log p(token | prefix) of every predicted token, one array per text."""
        return [-x for x in self._token_nll(list(texts))]

    def loss(self, texts: list[str], labels: np.ndarray | None = None) -> np.ndarray:
        """Per-sequence mean next-token NLL (``labels`` is ignored)."""
        return np.array([x.mean() if x.size else 0.0 for x in self._token_nll(list(texts))])

    @torch.no_grad()
    def probabilities(self, texts: list[str]) -> np.ndarray:
        """Next-token distribution after each text (no ``<eos>``), shape (n, V)."""
        rows = []
        for i in range(0, len(texts), self.batch_size):
            ids, mask = self.encode(texts[i : i + self.batch_size], add_eos=False)
            logits = self.model(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
            ).logits
            last = mask.sum(1) - 1
            rows.append(
                torch.softmax(logits[torch.arange(len(ids)), last.to(self.device)].double(), -1)
                .cpu()
                .numpy()
            )
        return np.concatenate(rows) if rows else np.zeros((0, self.tokenizer.vocab_size))

    next_token_probabilities = probabilities

    def perplexity(self, texts: list[str]) -> float:
        nll = self._token_nll(list(texts))
        total = sum(float(x.sum()) for x in nll)
        count = sum(x.size for x in nll)
        return math.exp(total / max(count, 1))

    def evaluate_utility(self, test: Examples, n_boot: int = 1000, seed: int = 0) -> dict:
        """Token-level perplexity on ``test`` with a 95% bootstrap CI over sequences."""
        if len(test) == 0:
            raise ValueError("the utility test set is empty")
        nll = self._token_nll(list(test.texts))
        sums = np.array([x.sum() for x in nll])
        counts = np.array([x.size for x in nll], dtype=float)
        value = math.exp(sums.sum() / counts.sum())
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
        boot = np.exp(sums[idx].sum(1) / counts[idx].sum(1))
        lo, hi = np.percentile(boot, [2.5, 97.5])
        return {
            "metric": "perplexity",
            "value": value,
            "ci_low": float(lo),
            "ci_high": float(hi),
            "n": len(test),
            "tokens": int(counts.sum()),
            "higher_is_better": False,
            "ci_method": f"bootstrap over sequences ({n_boot} resamples)",
        }

    # -- generation ------------------------------------------------------------
    @torch.no_grad()
    def generate_ids(
        self,
        prompts: list[str],
        max_new_tokens: int = 32,
        greedy: bool = True,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
    ) -> list[list[int]]:
        """Continuation token ids per prompt (stops at ``<eos>``)."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        n_ctx = context_length(self.model)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        results = []
        for prompt in prompts:
            tok = self.tokenizer
            ids = [tok.bos_id, *tok.token_ids(prompt)]
            if len(ids) + max_new_tokens > n_ctx:
                raise ValueError(
                    f"prompt of {len(ids)} tokens plus {max_new_tokens} new tokens exceeds the "
                    f"model's context length {n_ctx}; shorten the prompt or max_new_tokens"
                )
            x = torch.as_tensor([ids], device=self.device)
            new: list[int] = []
            for _ in range(max_new_tokens):
                logits = self.model(input_ids=x).logits[0, -1].double().cpu()
                if tok.pad_id != tok.eos_id:
                    logits[tok.pad_id] = -math.inf
                if tok.bos_id != tok.eos_id:
                    logits[tok.bos_id] = -math.inf
                if greedy:
                    nxt = int(logits.argmax())
                else:
                    logits = logits / temperature
                    if top_k is not None:
                        kth = torch.topk(logits, min(top_k, len(logits))).values[-1]
                        logits[logits < kth] = -math.inf
                    nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
                if nxt == tok.eos_id:
                    break
                new.append(nxt)
                x = torch.cat([x, torch.tensor([[nxt]], device=self.device)], dim=1)
            results.append(new)
        return results

    def generate(self, prompts: list[str], max_new_tokens: int = 32, **kw) -> list[str]:
        """Generated continuations (text after the prompt), one per prompt."""
        return [self.tokenizer.decode(r) for r in self.generate_ids(prompts, max_new_tokens, **kw)]

    # -- gradient surface ------------------------------------------------------
    def per_example_gradients(self, texts: list[str]) -> torch.Tensor:
        """Flattened per-sequence gradients of the mean next-token loss, [n, P] float64."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        was = self.model.training
        self.model.eval()
        rows = []
        for text in texts:
            ids, mask = self.encode([text])
            loss = sequence_loss(self.model, ids.to(self.device), mask.to(self.device))[0]
            grads = torch.autograd.grad(loss, params)
            rows.append(torch.cat([g.reshape(-1) for g in grads]).double().cpu())
        self.model.train(was)
        if not rows:
            return torch.zeros(0, sum(p.numel() for p in params), dtype=torch.float64)
        return torch.stack(rows)

    def gradient_update(self, texts: list[str], labels=None, seed: int = 0) -> np.ndarray:
        per_example = self.per_example_gradients(list(texts))
        generator = torch.Generator().manual_seed(seed)
        return self.gradient_mechanism.release(per_example, max(len(texts), 1), generator).numpy()


def fit_lm_nonprivate(target, train: Examples, training, seed: int):
    """The ``none`` defense on an LM target: plain AdamW training on the member texts."""
    from privacy_audit.defenses.base import TrainingReport
    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
    )

    model, tokenizer = target.build(seed)
    info = train_lm(
        model,
        tokenizer,
        list(train.texts),
        epochs=training.epochs,
        batch_size=training.batch_size,
        learning_rate=training.learning_rate,
        max_length=training.max_length,
        weight_decay=training.weight_decay,
        seed=seed,
        device=training.device,
        progress=training.progress,
        desc="train none (lm)",
    )
    claim = PrivacyClaim.none("Non-private training: no privacy guarantee is claimed.")
    schedule = SamplingSchedule(
        min(1.0, training.batch_size / max(len(train), 1)), int(info["steps"]), training.epochs
    )
    release = LMRelease(
        model,
        tokenizer,
        training.max_length,
        claim,
        training.device,
        GaussianGradientMechanism(None),
        schedule,
        label_names=list(getattr(target, "label_names", [])),
    )
    info["model"] = "GPT2LMHeadModel (tied embeddings)"
    return release, TrainingReport(info)


__all__ = [
    "LM_PRESETS",
    "LMRelease",
    "LMTokenizer",
    "build_lm",
    "build_lm_target",
    "build_tokenizer",
    "check_context",
    "fit_lm_nonprivate",
    "is_lm_target",
    "is_tied",
    "sequence_loss",
    "token_nll",
    "token_statistics",
    "token_statistics_from_logits",
    "train_lm",
    "training_tensors",
]
