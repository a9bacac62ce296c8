"""Gradient inversion: reconstruct training text from a released gradient update.

Works against every release exposing ``Surface.GRADIENTS`` with white-box weights: the BERT
classifier releases (``none``, ``dp-sgd``, ``dp-attention``) and the causal-LM releases
(``privacy_audit.targets.lm.LMRelease``: ``none``, ``phantom-dp-sgd``, ``dp-blogs`` on an LM target).
For an LM the text is its own target: the dummy's next-token targets are its own soft
tokens (framed by <bos> … <eos>), there are no labels, and the word order comes back too.
The adversary sees the update the mechanism releases for a batch of training sequences
and the model's weights and tokenizer, and recovers the text:

1. **Token prior from the embedding gradient.** Only the rows of the word-embedding
   table that the batch used get a gradient, so the rows that stand out of the noise
   floor (median + 6 MADs of the row norms) are the bag of tokens; the position-embedding
   rows that stand out give the sequence length (Melis et al. 2019; Gupta et al. 2022,
   "Recovering private text in federated learning", LAMP's setting). Under DP-SGD noise
   the floor swallows them and the attack falls back to the length prior ``max_tokens``.
2. **Label recovery (iDLG, Zhao et al. 2020).** The classifier bias gradient is
   mean_i(p_i − onehot(y_i)); its negative entries are the batch's labels.
3. **Continuous optimisation** of dummy input embeddings (not tokens) so that their
   gradient matches the released one, with one of three objectives:
   ``l2`` (DLG, Zhu et al. 2019), ``cosine`` (Inverting Gradients, Geiping et al. 2020) or
   ``tag`` (TAG, Deng et al. 2021: L2 + λ·L1).
4. **Projection to tokens:** each position takes the nearest (cosine) token embedding.
   With the token prior, positions are assigned to the prior's tokens by a linear
   assignment (each prior token used once, the rest by nearest neighbour); without it,
   the nearest token of the whole vocabulary.

Reported per batch size (1 and 4 by default), over ``sequences`` sequences, each with a
95% bootstrap CI over sequences: token recall (multiset), ROUGE-1 and ROUGE-2 F1 (bigram
recovery), exact-sequence recovery (Clopper–Pearson), label accuracy, and the recall of a
baseline adversary who guesses the most frequent public tokens without any gradient.
Sequences in one batch share a release, so at batch size > 1 the CI treats correlated
sequences as independent (an approximation, stated in the result).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import torch

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    mean_estimate,
    proportion_estimate,
)
from privacy_audit.defenses.base import ReleasedModel, Surface

OBJECTIVES = ("l2", "cosine", "tag")
PRIORS = ("embedding-gradient", "none")
EMBEDDINGS = ("simplex", "free")


# ------------------------------------------------------------------------------ metrics


def _ngrams(tokens: list[int], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def token_recall(reference: list[int], guess: list[int]) -> float:
    """Fraction of the reference's tokens (as a multiset) present in the guess."""
    if not reference:
        raise ValueError("empty reference sequence")
    hit = sum((Counter(reference) & Counter(guess)).values())
    return hit / len(reference)


def rouge_n(reference: list[int], guess: list[int], n: int) -> float:
    """ROUGE-n F1 over token ids (0 when either side has no n-gram)."""
    ref, hyp = _ngrams(reference, n), _ngrams(guess, n)
    overlap = sum((ref & hyp).values())
    if not ref or not hyp or overlap == 0:
        return 0.0
    p, r = overlap / sum(hyp.values()), overlap / sum(ref.values())
    return 2 * p * r / (p + r)


# ------------------------------------------------------------------------ memory budget


def estimate_memory_mb(model: torch.nn.Module, batch_size: int, tokens: int) -> float:
    """Rough peak memory of one optimisation step: parameters with their gradient, the
    second-order graph (~4 copies of the parameters) and activations (attention and
    feed-forward per layer, kept for double backward), plus the projection distances."""
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    h, layers = cfg.hidden_size, cfg.num_hidden_layers
    inter = getattr(cfg, "intermediate_size", 4 * h)
    heads = cfg.num_attention_heads
    per_token = layers * (12 * h + 3 * inter + 3 * heads * tokens)
    acts = 3 * batch_size * tokens * per_token
    proj = batch_size * tokens * cfg.vocab_size
    return 4 * (6 * params + acts + proj) / 2**20


def check_memory_budget(
    model: torch.nn.Module, batch_size: int, tokens: int, budget_mb: float
) -> float:
    """Raise ValueError when one batch would exceed the attack's memory budget."""
    need = estimate_memory_mb(model, batch_size, tokens)
    if need > budget_mb:
        raise ValueError(
            f"gradient inversion at batch size {batch_size} ({tokens} tokens) needs an "
            f"estimated {need:,.0f} MiB, over the memory budget of {budget_mb:,.0f} MiB "
            "(option memory_budget_mb); use smaller batch_sizes or max_tokens"
        )
    return need


# ------------------------------------------------------------------------------ attack


def _stand_out(norms: torch.Tensor) -> torch.Tensor:
    """Indices of rows whose gradient norm stands out of the noise floor."""
    med = norms.median()
    mad = (norms - med).abs().median()
    return torch.nonzero(norms > med + 6 * 1.4826 * mad + 1e-12).flatten()


def recover_labels(bias_grad: torch.Tensor, batch_size: int, mean_probs: Any = None) -> list[int]:
    """iDLG: the bias gradient is mean_i(p_i − onehot(y_i)), so at batch size 1 the label
    is its negative entry; at batch size b the count of class c is about b·(p̄_c − g_c),
    with p̄ the model's mean prediction (estimated on public data by the caller; uniform
    when not given)."""
    g = bias_grad.double()
    if batch_size == 1:
        return [int(torch.argmin(g))]
    n_classes = g.numel()
    p = (
        torch.full_like(g, 1.0 / n_classes)
        if mean_probs is None
        else torch.as_tensor(np.asarray(mean_probs), dtype=torch.float64)
    )
    est = batch_size * (p - g)
    counts = torch.clamp(torch.round(est), min=0).long()
    order = torch.argsort(g)
    while counts.sum() < batch_size:
        counts[order[int(counts.sum()) % n_classes]] += 1
    while counts.sum() > batch_size:
        counts[torch.argmax(counts)] -= 1
    return [c for c in range(n_classes) for _ in range(int(counts[c]))]


def _split_update(update, named: list, device) -> dict[str, torch.Tensor]:
    """The flat released update cut into one float tensor per trainable parameter
    (``named``: (name, parameter) in the order the release flattened them), on ``device``."""
    target, offset = {}, 0
    for name, p in named:
        target[name] = (
            torch.as_tensor(update[offset : offset + p.numel()]).view_as(p).to(device).float()
        )
        offset += p.numel()
    return target


def _token_prior(
    emb_grad: torch.Tensor,
    pos_grad: torch.Tensor | None,
    special: set,
    lm: bool,
    max_tokens: int,
) -> tuple[list[int], int]:
    """The tokens the batch used and its length, read from the update: the rows of the
    token-embedding gradient that stand out (special tokens left out), and the last
    position-embedding row that does (between 1 and ``max_tokens``; ``max_tokens`` when
    the model has no position embeddings or none stands out)."""
    length = max_tokens
    rows = _stand_out(emb_grad.norm(dim=1))
    prior = [int(t) for t in rows if int(t) not in special]
    if pos_grad is not None:
        pos_rows = _stand_out(pos_grad.norm(dim=1))
        if len(pos_rows):
            # rows 0..L+1 carry [CLS]/<bos>, L tokens, [SEP]/<eos>; a causal LM's
            # last position feeds no loss term, so its row has no gradient
            length = int(pos_rows.max()) + 1 - (1 if lm else 2)
            length = int(min(max(length, 1), max_tokens))
    return prior, length


def _project_to_tokens(
    table: torch.Tensor, embedded: torch.Tensor, special: set, prior: list[int], b: int, length: int
) -> list[list[int]]:
    """Each optimised position's nearest token by cosine similarity to the embedding
    ``table`` (special tokens excluded), per sequence; with a token ``prior``, the nearest
    prior token instead, one position per prior token when there are enough positions
    (a linear assignment)."""
    unit = torch.nn.functional.normalize(table, dim=1)
    zz = torch.nn.functional.normalize(embedded.reshape(-1, table.shape[1]), dim=1)
    sim = zz @ unit.T
    for t in special:
        if t is not None:
            sim[:, t] = -2
    vocab_guess = sim.argmax(dim=1).view(b, length).tolist()
    guess = vocab_guess
    if prior:
        from scipy.optimize import linear_sum_assignment

        sub = sim[:, prior].cpu().numpy()
        choice = sub.argmax(axis=1)
        if len(prior) <= sub.shape[0]:
            r, c = linear_sum_assignment(-sub)
            choice[r] = c
        flat = [prior[c] for c in choice]
        guess = [flat[i * length : (i + 1) * length] for i in range(b)]
    return guess


class GradientInversionAttack(LeakageAttack):
    name = "gradient-inversion"
    kind = "reconstruction"
    description = (
        "Gradient inversion of text from a released update: embedding-gradient token "
        "prior, iDLG labels, DLG/cosine/TAG matching of continuous embeddings, projection "
        "to tokens; token recall, ROUGE-1/2, exact recovery at batch sizes 1 and 4"
    )
    requires = frozenset({Surface.GRADIENTS})
    summary = "Reconstructs text from a released gradient update (DLG / TAG matching)."
    needs = ("gradients", "labels")
    cost = "hundreds of optimisation steps, each a forward + backward pass"
    OPTIONS = {
        "objective": (str, "tag"),
        "batch_sizes": (list, [1, 4]),
        "sequences": (int, 20),
        "max_tokens": (int, 12),
        "steps": (int, 60),
        "learning_rate": ((int, float), 0.2),
        "tag_l1_weight": ((int, float), 0.1),
        "token_prior": (str, "embedding-gradient"),
        "embeddings": (str, "simplex"),
        "memory_budget_mb": ((int, float), 4096),
    }

    def validate(self) -> None:
        o = self.options
        if o["objective"] not in OBJECTIVES:
            raise ValueError(
                f"unknown gradient-inversion objective {o['objective']!r}; allowed: {', '.join(OBJECTIVES)}"
            )
        if o["token_prior"] not in PRIORS:
            raise ValueError(
                f"unknown token_prior {o['token_prior']!r}; allowed: {', '.join(PRIORS)}"
            )
        if o["embeddings"] not in EMBEDDINGS:
            raise ValueError(
                f"unknown embeddings {o['embeddings']!r}; allowed: {', '.join(EMBEDDINGS)}"
            )
        sizes = o["batch_sizes"]
        if not sizes or not all(
            isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes
        ):
            raise ValueError(
                f"batch_sizes must be a non-empty list of integers >= 1, got {sizes!r}"
            )
        for key, low in (("sequences", 1), ("max_tokens", 2), ("steps", 0)):
            if int(o[key]) < low:
                raise ValueError(f"{key} must be >= {low}, got {o[key]!r}")
        for key in ("learning_rate", "memory_budget_mb"):
            if not o[key] > 0:
                raise ValueError(f"{key} must be > 0, got {o[key]!r}")
        if o["tag_l1_weight"] < 0:
            raise ValueError(f"tag_l1_weight must be >= 0, got {o['tag_l1_weight']!r}")

    # -- helpers -------------------------------------------------------------------

    def _truncate(self, tokenizer, texts, labels) -> list[tuple[str, list[int], int]]:
        """Texts cut to ``max_tokens`` tokens: (text, token ids without specials, label)."""
        out = []
        for text, label in zip(texts, labels, strict=True):
            if _is_lm_tokenizer(tokenizer):
                short = tokenizer.decode(tokenizer.token_ids(text)[: self.options["max_tokens"]])
            else:
                pieces = tokenizer.tokenize(text)[: self.options["max_tokens"]]
                short = tokenizer.convert_tokens_to_string(pieces)
            ids = _token_ids(tokenizer, short)
            if 3 <= len(ids) <= self.options["max_tokens"]:
                out.append((short, ids, int(label)))
        return out

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        model = getattr(release, "model", None)
        tokenizer = getattr(release, "tokenizer", None)
        if model is None or tokenizer is None:
            raise ValueError(
                "gradient inversion needs white-box access to the released model (model and tokenizer)"
            )
        o = self.options
        max_len = o["max_tokens"] + 2
        for b in o["batch_sizes"]:
            check_memory_budget(model, b, max_len, o["memory_budget_mb"])
        rng = np.random.default_rng(context.seed)
        order = rng.permutation(len(context.members))
        texts = [context.members.texts[i] for i in order]
        labels = context.members.labels[order]
        want = 4 * o["sequences"] * max(o["batch_sizes"])
        pool = self._truncate(tokenizer, texts[:want], labels[:want])
        public = context.public if context.public is not None else context.nonmembers
        freq = Counter(t for x in public.texts[:500] for t in _token_ids(tokenizer, x))
        metrics: dict[str, Any] = {}
        mean_probs = None  # the model's mean prediction on public text, for iDLG counts
        if Surface.PROBABILITIES in release.surfaces and not _is_lm_tokenizer(tokenizer):
            mean_probs = release.probabilities(list(public.texts[:64])).mean(axis=0)
        details: dict[str, Any] = {
            "objective": o["objective"],
            "token_prior": o["token_prior"],
            "steps": o["steps"],
            "max_tokens": o["max_tokens"],
            "mechanism_private": bool(
                getattr(getattr(release, "gradient_mechanism", None), "private", False)
            ),
        }
        samples = []
        traces: list[tuple[float, float]] = []
        for b in o["batch_sizes"]:
            n_batches = math.ceil(o["sequences"] / b)
            if n_batches * b > len(pool):
                raise ValueError(
                    f"need {n_batches * b} member sequences of >= 3 tokens for batch size {b}, "
                    f"have {len(pool)}"
                )
            per_seq: dict[str, list[float]] = {
                "recall": [],
                "rouge1": [],
                "rouge2": [],
                "exact": [],
                "label": [],
                "baseline": [],
            }
            for batch_index in range(n_batches):
                idx = range(batch_index * b, (batch_index + 1) * b)
                batch = [pool[i][:2] for i in idx]
                ys = [pool[i][2] for i in idx]
                seed = context.seed * 1000 + batch_index
                rec, guessed_labels = self._invert(release, batch, ys, seed, mean_probs)
                if self._trace:
                    traces.append((self._trace[0], self._trace[-1]))
                true = [ids for _, ids in batch]
                assign = _match(true, rec)
                for i, ref in enumerate(true):
                    guess = rec[assign[i]]
                    per_seq["recall"].append(token_recall(ref, guess))
                    per_seq["rouge1"].append(rouge_n(ref, guess, 1))
                    per_seq["rouge2"].append(rouge_n(ref, guess, 2))
                    per_seq["exact"].append(float(guess == ref))
                    common = [t for t, _ in freq.most_common(len(ref))]
                    per_seq["baseline"].append(token_recall(ref, common))
                    if len(samples) < 6:
                        samples.append(
                            {
                                "batch_size": b,
                                "reference": tokenizer.decode(ref),
                                "reconstruction": tokenizer.decode(guess),
                            }
                        )
                if guessed_labels:  # a classifier: iDLG label recovery
                    per_seq["label"].append(float(sorted(guessed_labels) == sorted(ys)))
            sfx = f"_b{b}"
            boot = dict(n_boot=context.settings.n_boot, seed=context.seed)
            metrics["token_recall" + sfx] = mean_estimate(per_seq["recall"], **boot)
            metrics["rouge1" + sfx] = mean_estimate(per_seq["rouge1"], **boot)
            metrics["rouge2" + sfx] = mean_estimate(per_seq["rouge2"], **boot)
            metrics["exact_sequence" + sfx] = proportion_estimate(
                int(sum(per_seq["exact"])), len(per_seq["exact"])
            )
            if per_seq["label"]:
                metrics["label_recovery" + sfx] = proportion_estimate(
                    int(sum(per_seq["label"])), len(per_seq["label"]), unit="batch"
                )
            metrics["token_recall" + sfx + "_baseline"] = mean_estimate(per_seq["baseline"], **boot)
            details[f"batches{sfx}"] = n_batches
        if traces:
            details["objective_first_step_mean"] = float(np.mean([a for a, _ in traces]))
            details["objective_last_step_mean"] = float(np.mean([z for _, z in traces]))
        details["ci_note"] = (
            "bootstrap over sequences; at batch size > 1 sequences of one batch share a "
            "release, so their CI is approximate"
        )
        head = f"token_recall_b{o['batch_sizes'][0]}"
        return LeakageResult(
            self.name,
            self.kind,
            self.description,
            headline=head,
            metrics=metrics,
            details=details,
            samples=[] if context.aggregate_only else samples,
        )

    # -- the inversion --------------------------------------------------------------

    def _invert(self, release, batch, labels, seed, mean_probs=None):
        """Reconstruct one batch from its released update; returns token ids per
        sequence and the recovered labels."""
        from privacy_audit.targets.classifier import forward_kwargs

        o = self.options
        model, tokenizer = release.model, release.tokenizer
        device = next(model.parameters()).device
        b = len(batch)
        update = release.gradient_update([t for t, _ in batch], np.asarray(labels), seed=seed)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        target = _split_update(update, named, device)
        emb = model.get_input_embeddings().weight
        emb_name = next(n for n, p in named if p is emb)
        pos_name = next(
            (n for n, _ in named if "position_embeddings" in n or n.endswith("wpe.weight")), None
        )
        lm = _is_lm_tokenizer(tokenizer)
        if lm:  # causal LM: <bos> tokens <eos>, the text is its own target
            first, last = tokenizer.bos_id, tokenizer.eos_id
            special = {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id}
            if o["embeddings"] != "simplex":
                raise ValueError(
                    "gradient inversion of a language model needs embeddings = 'simplex' "
                    "(its targets are the tokens themselves)"
                )
        else:  # classifier: [CLS] tokens [SEP]
            first, last = tokenizer.cls_token_id, tokenizer.sep_token_id
            special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}

        # 1. token prior and length
        prior: list[int] = []
        length = o["max_tokens"]
        if o["token_prior"] == "embedding-gradient":
            prior, length = _token_prior(
                target[emb_name], target.get(pos_name), special, lm, o["max_tokens"]
            )
        # 2. labels (iDLG; a language model has none)
        ys: list[int] = []
        if not lm:
            n_labels = model.config.num_labels
            bias = [n for n, p in named if p.ndim == 1 and p.numel() == n_labels][-1]
            ys = recover_labels(target[bias], b, mean_probs)
        # 3. continuous optimisation of the content embeddings
        matched = [n for n, _ in named if n != emb_name]
        params = [p for n, p in named if n != emb_name]
        tgt = [target[n] for n in matched]
        g = torch.Generator().manual_seed(seed)
        table = emb.detach()
        if o["embeddings"] == "simplex":
            # each position a convex combination of candidate token embeddings
            cand = prior or [t for t in range(table.shape[0]) if t not in special]
            basis = table[cand]
            w = (0.01 * torch.randn(b, length, len(cand), generator=g)).to(device)
            w.requires_grad_(True)
            leaf = w

            def soft():
                return torch.softmax(w, dim=-1)

            def embed():
                return soft() @ basis
        else:
            scale = float(table.std())
            z = (torch.randn(b, length, table.shape[1], generator=g) * scale).to(device)
            z.requires_grad_(True)
            leaf = z

            def embed():
                return z

        cls = table[first].expand(b, 1, -1)
        sep = table[last].expand(b, 1, -1)
        y = torch.as_tensor(ys, device=device)
        if lm:  # soft next-token targets: the content distributions, then <eos>
            scatter = torch.zeros(len(cand), table.shape[0], device=device)
            scatter[torch.arange(len(cand)), torch.as_tensor(cand)] = 1.0
            eos = torch.zeros(b, 1, table.shape[0], device=device)
            eos[..., last] = 1.0
        opt = torch.optim.Adam([leaf], lr=float(o["learning_rate"]))
        was_training = model.training
        model.eval()
        # fused SDPA kernels have no double backward on CPU: match with eager attention
        impl = getattr(model.config, "_attn_implementation", None)
        if impl not in (None, "eager") and hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        ids_shape = torch.zeros(b, length + 2, dtype=torch.long, device=device)
        if lm:
            kw = {"attention_mask": torch.ones_like(ids_shape)}
        else:
            kw = forward_kwargs(model, ids_shape, torch.ones_like(ids_shape))
            kw.pop("input_ids")
        trace = []
        for _ in range(int(o["steps"])):
            opt.zero_grad()
            x = torch.cat([cls, embed(), sep], dim=1)
            out = model(inputs_embeds=x, **kw)
            if lm:  # mean next-token cross-entropy, as the release computes it
                targets = torch.cat([soft() @ scatter, eos], dim=1)
                logp = torch.log_softmax(out.logits[:, :-1], dim=-1)
                loss = -(targets * logp).sum(-1).mean()
            else:
                loss = torch.nn.functional.cross_entropy(out.logits, y)
            grads = torch.autograd.grad(loss, params, create_graph=True)
            objective = self._objective(grads, tgt)
            objective.backward()
            opt.step()
            trace.append(float(objective.detach()))
        model.train(was_training)
        if impl not in (None, "eager") and hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation(impl)
        # 4. projection to tokens
        with torch.no_grad():
            guess = _project_to_tokens(table, embed().detach(), special, prior, b, length)
        self._trace = trace
        return guess, ys

    def _objective(self, grads, target) -> torch.Tensor:
        kind = self.options["objective"]
        if kind == "cosine":
            dot = sum((g * t).sum() for g, t in zip(grads, target, strict=True))
            gn = torch.sqrt(sum((g * g).sum() for g in grads))
            tn = torch.sqrt(sum((t * t).sum() for t in target))
            return 1 - dot / (gn * tn + 1e-12)
        l2 = sum(((g - t) ** 2).sum() for g, t in zip(grads, target, strict=True))
        if kind == "l2":
            return l2
        l1 = sum((g - t).abs().sum() for g, t in zip(grads, target, strict=True))
        return l2 + float(self.options["tag_l1_weight"]) * l1


def _is_lm_tokenizer(tokenizer) -> bool:
    """The suite's LM tokenizer (``privacy_audit.targets.lm.LMTokenizer``) rather than a Hugging Face one."""
    return hasattr(tokenizer, "token_ids") and hasattr(tokenizer, "bos_id")


def _token_ids(tokenizer, text: str) -> list[int]:
    if _is_lm_tokenizer(tokenizer):
        return list(tokenizer.token_ids(text))
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _match(true: list[list[int]], rec: list[list[int]]) -> list[int]:
    """Assign reconstructions to references maximising total token recall."""
    if len(true) == 1:
        return [0]
    from scipy.optimize import linear_sum_assignment

    cost = np.array([[-token_recall(t, r) for r in rec] for t in true])
    rows, cols = linear_sum_assignment(cost)
    out = [0] * len(true)
    for r, c in zip(rows, cols, strict=True):
        out[r] = int(c)
    return out
