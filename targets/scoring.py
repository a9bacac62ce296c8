"""Scoring a user's causal LM: one forward pass per text feeds every LM signal.

- :class:`HFTokenizer` puts a user's Hugging Face tokenizer behind the suite's LM
  tokenizer interface (``encode`` / ``token_ids`` / ``decode``), so the suite's LM code
  (releases, training loops, DP engines) runs on the user's model unchanged. Each text is
  encoded exactly as ``tokenizer(text)`` encodes it (and cut as ``tokenizer(text,
  truncation=True, max_length=...)`` cuts it), so the model is scored on the tokens and
  positions it was trained on; ``add_bos`` / ``add_eos`` (``[target]``) change that for a
  model trained with another convention. Every statistic is over the tokens the model
  predicts: without a BOS the first token has no prediction and is not scored. A
  tokenizer without a pad token pads with EOS; padding is masked out of every statistic
  by the attention mask, never by the token id.
- Padding side: right for scoring (positions 0..L-1 stay where training put them; the
  padding lies after every real token, so causal attention never sees it), left for
  batched generation (every prompt ends at the last column, where new tokens are
  appended; position ids follow the attention mask).
- :func:`score_texts` runs texts through the model in batches of similar length (longest
  first, so an out-of-memory error shows up on the first batch), with a batch size that
  halves on CUDA out-of-memory instead of failing, and returns per text the
  :class:`~privacy_audit.defenses.base.TokenStats` and the mean-pooled last hidden state of the *same*
  forward pass.
- :class:`HFLMRelease` is the released causal LM built on them: per-token / per-sequence
  loss, next-token distributions, generation, gradients and hidden states.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from privacy_audit.defenses.base import PrivacyClaim, Surface, TokenStats
from privacy_audit.targets.lm import LMRelease, token_statistics_from_logits

#: The batch size a CUDA out-of-memory error halves down to before giving up.
MIN_BATCH = 1


class HFTokenizer:
    """A Hugging Face tokenizer with the interface of :class:`privacy_audit.targets.lm.LMTokenizer`.

    A text is encoded exactly as ``tokenizer(text)`` encodes it (the tokenizer's own
    ``add_special_tokens``: GPT-2 and GPT-NeoX add nothing, Llama adds ``<s>``, OPT adds
    ``</s>`` in front), and cut at ``max_length`` as ``tokenizer(text, truncation=True,
    max_length=...)`` cuts it (the special tokens stay, the text's tokens are cut).
    ``add_bos`` / ``add_eos`` change that for a model trained otherwise: ``add_bos`` =
    ``"auto"`` (as the tokenizer), ``True`` (a leading BOS, or EOS when the tokenizer has no
    BOS: GPT-2's ``<|endoftext|>`` separator) or ``False`` (no leading BOS);
    ``add_eos = True`` appends EOS (``False``: only what the tokenizer itself appends).
    """

    kind = "hf"

    def __init__(self, tokenizer, add_bos: bool | str = "auto", add_eos: bool = False) -> None:
        if add_bos not in ("auto", True, False):
            raise ValueError(f'add_bos must be "auto", true or false, got {add_bos!r}')
        if add_eos not in (True, False):
            raise ValueError(f"add_eos must be true or false, got {add_eos!r}")
        eos = tokenizer.eos_token_id
        if eos is None:
            eos = tokenizer.pad_token_id
        if eos is None:
            raise ValueError(
                "the tokenizer has neither an EOS nor a pad token; a causal LM needs one to "
                "end and pad sequences"
            )
        self.hf = tokenizer
        self.eos_id = int(eos)
        self.pad_id = int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else eos
        self.bos_id = int(tokenizer.bos_token_id) if tokenizer.bos_token_id is not None else eos
        self.unk_id = tokenizer.unk_token_id
        self.add_bos_option, self.add_eos = add_bos, bool(add_eos)
        self._vocab: list[str] | None = None
        # Tokenize once: the whole-text encoding (no special tokens) of every
        # text this object has tokenized whole, as int32. The cut to max_length
        # (truncate_text) leaves here the ids of the cut text it verified, and those are
        # the ids that drop_unscored, the scoring pass (encode / row), every attack
        # (token_ids) and a reference model sharing this object then read: a text is
        # encoded once, a cut text once when the cut provably re-encodes to the kept ids
        # (stable_cuts: a byte-level BPE cut between two pre-tokens), else twice (its
        # head, to find the cut, then the cut text, to check that it re-encodes to the
        # kept ids). Memory: 4 bytes per kept token.
        self._encoded: dict[str, np.ndarray] = {}
        self._cuts: dict[tuple[str, int], str] = {}  # (text, budget) -> the cut text
        # Whether a cut at a pre-token boundary provably re-encodes to the kept ids, so
        # truncate_text need not re-encode the cut text to check (None: not yet read).
        self._stable_cuts: bool | None = None
        self._byte_decoder: dict[str, int] | None = None
        # The longest token string bounds how many characters max_length tokens can
        # cover; texts are cut to (a multiple of) that many characters before they are
        # tokenized.
        self.max_token_chars = max(
            (len(t) for t in tokenizer.get_vocab()), default=1
        )  # byte-level markers (e.g. GPT-2's 'Ġ') only make the bound looser
        own_prefix, own_suffix = self._own_specials()
        self.own_prefix, self.own_suffix = own_prefix, own_suffix
        prefix = list(own_prefix)
        if add_bos is True and not (prefix and prefix[0] == self.bos_id):
            prefix = [self.bos_id, *prefix]
        elif add_bos is False and prefix and prefix[0] == self.bos_id:
            prefix = prefix[1:]
        suffix = list(own_suffix)
        if self.add_eos and not (suffix and suffix[-1] == self.eos_id):
            suffix.append(self.eos_id)
        self.prefix, self.suffix = prefix, suffix

    def _own_specials(self) -> tuple[list[int], list[int]]:
        """The ids ``tokenizer(text)`` puts before and after the text's own tokens."""
        probe = "The quick brown fox jumps over the lazy dog"
        with_sp = list(self.hf(probe, add_special_tokens=True)["input_ids"])
        plain = list(self.hf(probe, add_special_tokens=False)["input_ids"])
        n = len(plain)
        for k in range(len(with_sp) - n + 1):
            if with_sp[k : k + n] == plain:
                return with_sp[:k], with_sp[k + n :]
        raise ValueError(
            "the tokenizer's special tokens are not a prefix and a suffix around the text's "
            "tokens; its encoding cannot be reproduced"
        )

    @property
    def has_bos(self) -> bool:
        """Whether an encoded text starts with a token before its own (so its first token
        is predicted and scored)."""
        return bool(self.prefix)

    @property
    def specials(self) -> int:
        """Special tokens around every encoded text."""
        return len(self.prefix) + len(self.suffix)

    def convention(self) -> dict:
        """How texts are encoded, for results.json and the report."""
        conv = self.hf.convert_ids_to_tokens
        first = (
            f"scored after {' '.join(conv(self.prefix))}"
            if self.prefix
            else "not scored: no BOS (no token precedes it)"
        )
        follows = self.prefix == self.own_prefix and self.suffix == self.own_suffix
        return {
            "encoding": "tokenizer(text)"
            if follows
            else "tokenizer(text) with add_bos / add_eos changed",
            "add_bos": self.add_bos_option,
            "add_eos": self.add_eos,
            "prefix_tokens": conv(self.prefix),
            "suffix_tokens": conv(self.suffix),
            "first_token": first,
            "truncation": f"{getattr(self.hf, 'truncation_side', 'right')} side, as "
            "tokenizer(text, truncation=True, max_length=...)",
        }

    @property
    def vocab_size(self) -> int:
        return len(self.hf)

    def __len__(self) -> int:
        return len(self.hf)

    @property
    def vocab(self) -> list[str]:
        """Token strings by id (for cache keys and comparing tokenizers)."""
        if self._vocab is None:
            inv = {i: t for t, i in self.hf.get_vocab().items()}
            self._vocab = [inv.get(i, "") for i in range(len(self.hf))]
        return self._vocab

    def char_cap(self, max_tokens: int) -> int:
        """Characters that can never produce more than ``max_tokens`` tokens' worth of
        prefix: anything beyond is cut before tokenizing (work stays O(max_length)).

        Deliberately not ``privacy_audit.audit.textcap.char_cap``: that one is tokenizer-agnostic (a
        fixed 64 characters per token, applied to the data at loading), while this bound
        comes from this tokenizer's own longest token."""
        return (max_tokens + 1) * self.max_token_chars

    def _head(self, text: str, budget: int) -> tuple[list[int], bool, list[int] | None, bool]:
        """``(ids, cut, ends, boundary)``: the first ``budget`` token ids of ``text`` (no
        special tokens) exactly as in the tokenization of the whole text, whether the text
        had more, the character offset where each kept token ends (None without offsets),
        and whether the cut falls between two pre-tokens (the last kept token and the first
        dropped one belong to different pre-tokenizer words; False when not known).

        Only a prefix of the text is tokenized (work stays O(max_length)); it grows until
        it holds more than ``budget`` tokens and a whitespace lies after the kept ones, so
        the word the prefix cuts in two cannot change them."""
        known = self._encoded.get(text)
        if known is not None and known.size <= budget:  # the whole text's ids, made once
            return known.tolist(), False, None, False
        fast = bool(getattr(self.hf, "is_fast", False))
        if getattr(self.hf, "truncation_side", "right") == "left":
            ids = list(self.hf(text, add_special_tokens=False)["input_ids"])
            self._remember(text, ids)
            return ids[-budget:], len(ids) > budget, None, False
        cap = self.char_cap(budget)
        while True:
            capped = text[:cap]
            whole = len(capped) == len(text)
            enc = self.hf(capped, add_special_tokens=False, return_offsets_mapping=fast)
            ids = list(enc["input_ids"])
            if whole:
                self._remember(text, ids)
            if len(ids) <= budget:
                if whole:
                    return ids, False, None, False
            elif not fast:
                if whole or len(ids) > budget + 1:
                    return ids[:budget], True, None, False
            else:
                ends = [int(e) for _, e in enc["offset_mapping"][:budget]]
                if whole or any(c.isspace() for c in capped[ends[-1] :]):
                    words = enc.word_ids()
                    last, after = words[budget - 1], words[budget]
                    boundary = last is not None and after is not None and last != after
                    return ids[:budget], True, ends, boundary
            cap *= 2

    def stable_cuts(self) -> bool:
        r"""Whether a cut between two pre-tokens provably re-encodes to the kept ids: a
        byte-level BPE (no dropout) behind the GPT-2 regex pre-tokenizer (``ByteLevel``
        with ``use_regex``) and no normalizer (GPT-2, OPT and this suite's test
        tokenizers; anything else is checked by re-encoding).

        Why: the text is cut where one pre-token ends and the next begins. Every
        pre-token the regex matched before the cut ends at or before it, and each match
        depends only on characters before its end and on the one after it: the greedy
        letter, number and symbol classes stop at the first character of another class,
        and ``\s+(?!\S)`` looks one character ahead. In the cut text the last match
        stops at the end of the string instead, at the same place, and a whitespace run
        that ended before a non-space keeps its length (at the end of the string the
        lookahead also holds). So the cut text pre-tokenizes into the same words, BPE
        encodes each word on its own, and the ids are the kept ones."""
        if self._stable_cuts is None:
            self._stable_cuts = False
            backend = getattr(self.hf, "backend_tokenizer", None)
            if backend is not None and bool(getattr(self.hf, "is_fast", False)):
                import json

                try:
                    spec = json.loads(backend.to_str())
                except (TypeError, ValueError):
                    spec = {}
                pre = spec.get("pre_tokenizer") or {}
                model = spec.get("model") or {}
                self._stable_cuts = bool(
                    spec.get("normalizer") is None
                    and pre.get("type") == "ByteLevel"
                    and pre.get("use_regex", True)
                    and model.get("type") == "BPE"
                    and not model.get("dropout")
                )
        return self._stable_cuts

    def _token_text(self, token_id: int) -> str | None:
        """The text of one byte-level token, or None when its bytes are not whole UTF-8
        characters (a character split between two tokens) or not byte-level symbols."""
        if self._byte_decoder is None:
            self._byte_decoder = {ch: b for b, ch in byte_level_alphabet().items()}
        try:
            raw = bytes(self._byte_decoder[ch] for ch in self.vocab[token_id])
            return raw.decode("utf-8")
        except (KeyError, IndexError, UnicodeDecodeError):
            return None

    def _remember(self, text: str, ids: list[int]) -> None:
        """Keep ``ids``, the encoding of the whole ``text`` (see ``_encoded``)."""
        self._encoded[text] = np.asarray(ids, dtype=np.int32)

    def _suffix(self, add_eos: bool | None) -> list[int]:
        if add_eos is None:  # the convention
            return self.suffix
        if not add_eos:  # the prompt of a continuation
            return []
        return self.suffix if self.suffix[-1:] == [self.eos_id] else [*self.suffix, self.eos_id]

    def _budget(self, max_length: int, suffix: list[int]) -> int:
        budget = max_length - len(self.prefix) - len(suffix)
        if budget < 1:
            raise ValueError(
                f"max_length = {max_length} leaves no room for a text's tokens beside "
                f"{len(self.prefix) + len(suffix)} special token(s)"
            )
        return budget

    def token_ids(self, text: str, max_tokens: int | None = None) -> list[int]:
        """Ids of ``text`` without special tokens (at most ``max_tokens``)."""
        if max_tokens is None:
            known = self._encoded.get(text)
            if known is not None:
                return known.tolist()
            ids = list(self.hf(text, add_special_tokens=False)["input_ids"])
            self._remember(text, ids)
            return ids
        return self._head(text, max_tokens)[0]

    def row(self, text: str, max_length: int, add_eos: bool | None = None) -> list[int]:
        """The ids of one encoded text, as ``tokenizer(text, truncation=True,
        max_length=max_length)`` gives them under this convention. ``add_eos``: None
        follows the convention, False gives the prompt of a continuation (no suffix),
        True ends the row with EOS."""
        suffix = self._suffix(add_eos)
        ids = self._head(text, self._budget(max_length, suffix))[0]
        return [*self.prefix, *ids, *suffix]

    def truncate_text(self, text: str, max_length: int) -> str:
        """The prefix of ``text`` that :meth:`encode` keeps under ``max_length``: the data
        is cut to it once, so zlib and every other per-example signal see exactly the
        scored text. The cut lies at a kept token's end, stepped back a token when the
        cut text would tokenize differently (a character split between byte tokens, a
        trimmed white-space offset, another tokenizer's rules), so the cut text's
        encoding is the truncated encoding (or a prefix of it). Where :meth:`stable_cuts`
        proves it (a cut between two pre-tokens, ending in the last kept token's own
        text), the cut text is not re-encoded to check (about 0.45 ms per cut
        text at 256 tokens, 9 s of a 10,000-per-side run)."""
        budget = self._budget(max_length, self.suffix)
        done = self._cuts.get((text, budget))
        if done is not None:  # e.g. the test set is the non-members: cut once
            return done
        ids, cut, ends, boundary = self._head(text, budget)
        if not cut:
            return text
        piece = None
        if ends is not None and boundary and self.stable_cuts():
            # a cut between two pre-tokens re-encodes to the kept ids (stable_cuts); the
            # last kept token's own text, ending the cut text in a non-space, shows that
            # its offset is exact (offsets of whitespace-only tokens may be trimmed)
            last = self._token_text(ids[-1])
            end = ends[-1]
            if last and not last[-1].isspace() and text[:end].endswith(last):
                piece = text[:end]
                self._remember(piece, ids)
        if piece is None and ends is not None:
            for k in range(len(ids), 0, -1):
                piece = text[: ends[k - 1]]
                if list(self.hf(piece, add_special_tokens=False)["input_ids"]) == ids[:k]:
                    self._remember(piece, ids[:k])  # the ids the cut text is scored on
                    break
                piece = None
        if piece is None:  # no offsets (a slow tokenizer): the cut text is re-encoded once
            piece = self.hf.decode(ids)
        self._cuts[(text, budget)] = piece
        return piece

    def encode(
        self,
        texts: Sequence[str],
        max_length: int,
        add_eos: bool | None = None,
        left_pad: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` of the encoded rows (:meth:`row`), padded with
        the pad (or EOS) id on the right (scoring and training) or on the left
        (``left_pad``, batched generation)."""
        if max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {max_length}")
        rows = [self.row(text, max_length, add_eos) for text in texts]
        longest = max((len(r) for r in rows), default=1)
        out = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for i, r in enumerate(rows):
            sl = slice(longest - len(r), longest) if left_pad else slice(0, len(r))
            out[i, sl] = torch.as_tensor(r, dtype=torch.long)
            mask[i, sl] = 1
        return out, mask

    def decode(self, ids) -> str:
        special = {self.bos_id, self.eos_id, self.pad_id}
        return self.hf.decode([int(i) for i in ids if int(i) not in special])


def byte_level_alphabet() -> dict[int, str]:
    """The byte -> character map of byte-level BPE (GPT-2): printable Latin-1 bytes map to
    themselves, the other 68 bytes to the characters from U+0100 on, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    out = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def same_tokenizer(a: HFTokenizer, b: HFTokenizer) -> str | None:
    """None when ``a`` and ``b`` map text to the same ids; else what differs."""
    if a.vocab_size != b.vocab_size:
        return f"vocabulary sizes differ ({a.vocab_size} vs {b.vocab_size})"
    if a.hf.get_vocab() != b.hf.get_vocab():
        return "the vocabularies map tokens to different ids"
    for name in ("bos_id", "eos_id"):
        if getattr(a, name) != getattr(b, name):
            return f"special token {name[:3]} differs ({getattr(a, name)} vs {getattr(b, name)})"
    probe = "The quick brown fox, 1234 jumps! Über naïve café."
    if a.token_ids(probe) != b.token_ids(probe):
        return "the tokenizers split the same text differently"
    return None


def is_cuda_oom(exc: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(exc, oom)) or (
        isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)
    )


def with_oom_backoff(run: Callable[[int], object], batch_size: int, on_backoff=None):
    """``run(batch_size)``; on a CUDA out-of-memory error the CUDA cache is emptied and it
    is retried with half the batch size, down to :data:`MIN_BATCH` (then the error
    propagates). Returns ``(result, batch size that worked)``."""
    b = int(batch_size)
    while True:
        try:
            return run(b), b
        except Exception as exc:  # noqa: BLE001 - only CUDA OOM is retried
            if not is_cuda_oom(exc) or b <= MIN_BATCH:
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            b = max(MIN_BATCH, b // 2)
            if on_backoff is not None:
                on_backoff(b)


def length_batches(lengths: Sequence[int], batch_size: int, token_budget: int | None = None):
    """Index batches over texts sorted by length, longest first; each batch holds at most
    ``batch_size`` rows and (when given) ``token_budget`` padded tokens."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batch: list[int] = []
    for i in order:
        width = lengths[batch[0]] if batch else lengths[i]
        if batch and (
            len(batch) >= batch_size
            or (token_budget is not None and width * (len(batch) + 1) > token_budget)
        ):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def _input_device(model) -> torch.device:
    emb = model.get_input_embeddings()
    return emb.weight.device if emb is not None else next(model.parameters()).device


#: How many special tokens an encoding may put before a text's own tokens (BOS, ...).
MAX_LEAD = 4


def suffix_span(row, text_ids, prefix_tokens: int, suffix_tokens: int) -> tuple[int, int] | None:
    """Where an extraction suffix lies among a scored row's *targets* (``row[1:]``).

    The prefix is the text's first ``prefix_tokens`` tokens (``text_ids``: the text's
    own tokens, no special tokens) and the suffix the next ``suffix_tokens``. The row is
    the text as the model is scored on it (whatever special tokens the encoding puts
    first), so the prompt a product would send is ``row[: lead + prefix_tokens]``. Returns
    ``(start, stop)`` in target coordinates, or None when the row does not hold the whole
    prefix and suffix (a text too short, or cut by ``max_length``)."""
    need = int(prefix_tokens) + int(suffix_tokens)
    if prefix_tokens < 1 or suffix_tokens < 1 or len(text_ids) < need:
        return None
    want = [int(t) for t in text_ids[:need]]
    r = [int(t) for t in row]
    for lead in range(0, min(len(r) - need, MAX_LEAD) + 1):
        if r[lead : lead + need] == want:
            start = lead + int(prefix_tokens) - 1
            return start, start + int(suffix_tokens)
    return None


def _decoding_log_probs(logits, ids, n_targets: int, span, decoding) -> np.ndarray:
    """Per-target log P_decode at ``span`` (NaN elsewhere) from one row's logits [L, V]."""
    out = np.full(n_targets, np.nan)
    if span is not None:
        s, e = span
        # logits at position t predict the token at t + 1 (target t)
        vals = decoding.log_probs(logits[s:e], ids[s + 1 : e + 1]).cpu().numpy()
        out[s:e] = np.where(np.isnan(vals), np.inf, vals)  # +inf: the model gave NaN here
    return out


@torch.no_grad()
def forward_stats(
    model,
    ids: torch.Tensor,
    mask: torch.Tensor,
    hidden: bool = True,
    decoding=None,
    spans: Sequence[tuple[int, int] | None] | None = None,
):
    """One forward pass -> (TokenStats per row, mean-pooled last hidden state [B, d]).

    With ``decoding`` (a :class:`~privacy_audit.targets.decoding.Decoding`) and per-row target
    ``spans``, the same logits also give ``TokenStats.decoding_log_probs``: each span
    token's probability under the product's sampling distribution (temperature, top-k,
    top-p applied as generation applies them), which needs the full distribution at those
    positions and so is computed here, not from the stored statistics."""
    dev = _input_device(model)
    ids, mask = ids.to(dev), mask.to(dev)
    out = model(input_ids=ids, attention_mask=mask, output_hidden_states=hidden)
    stats = token_statistics_from_logits(out.logits, ids, mask)
    if decoding is not None:
        spans = list(spans) if spans is not None else [None] * len(stats)
        stats = [
            dataclasses.replace(
                st,
                decoding_log_probs=_decoding_log_probs(
                    out.logits[i], ids[i], len(st), spans[i], decoding
                ),
            )
            for i, st in enumerate(stats)
        ]
    pooled = None
    if hidden:
        h = out.hidden_states[-1].float()
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = ((h * m).sum(1) / m.sum(1).clamp(min=1)).cpu().numpy().astype(np.float64)
    return stats, pooled


def encode_lengths(tokenizer, texts: Sequence[str], max_length: int):
    """Per text: its encoded row (the tokenizer's convention, cut to ``max_length``) and
    length."""
    rows = [tokenizer.encode([t], max_length)[0][0] for t in texts]
    return rows, [int(r.numel()) for r in rows]


def score_batch(
    model,
    tokenizer,
    rows: Sequence[torch.Tensor],
    hidden: bool = True,
    decoding=None,
    spans: Sequence[tuple[int, int] | None] | None = None,
):
    """One right-padded forward pass over encoded ``rows``: (TokenStats list, pooled hidden)."""
    width = max(int(r.numel()) for r in rows)
    pad = getattr(tokenizer, "pad_id", 0)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, : r.numel()] = r
        mask[k, : r.numel()] = 1
    return forward_stats(model, ids, mask, hidden, decoding, spans)


def extraction_spans(tokenizer, texts: Sequence[str], rows, extraction) -> list:
    """:func:`suffix_span` of each encoded row (None for every row without ``extraction``)."""
    if extraction is None:
        return [None] * len(rows)
    return [
        suffix_span(
            r.tolist(), tokenizer.token_ids(t), extraction.prefix_tokens, extraction.suffix_tokens
        )
        for t, r in zip(texts, rows, strict=True)
    ]


def score_texts(
    model,
    tokenizer,
    texts: Sequence[str],
    max_length: int,
    batch_size: int = 32,
    token_budget: int | None = None,
    hidden: bool = True,
    progress=None,
    extraction=None,
):
    """TokenStats and pooled hidden states for ``texts``, one forward pass each, batched
    by length with CUDA out-of-memory backoff. Returns ``(stats, hidden or None, batch)``
    with ``batch`` the batch size that was finally used. With ``extraction`` (an
    :class:`~privacy_audit.targets.decoding.ExtractionSpec`) each text's stats also carry its
    suffix's decoding log-probabilities, from the same pass."""
    texts = list(texts)
    rows, lengths = encode_lengths(tokenizer, texts, max_length)
    spans = extraction_spans(tokenizer, texts, rows, extraction)
    decoding = extraction.decoding if extraction is not None else None
    stats: list[TokenStats | None] = [None] * len(texts)
    pooled: list[np.ndarray | None] = [None] * len(texts)

    def run_all(b: int):
        for idx in length_batches(lengths, b, token_budget):
            idx = [i for i in idx if stats[i] is None]  # done before a backoff
            if not idx:
                continue
            s, h = score_batch(
                model, tokenizer, [rows[i] for i in idx], hidden, decoding, [spans[i] for i in idx]
            )
            for k, i in enumerate(idx):
                stats[i] = s[k]
                pooled[i] = None if h is None else h[k]
            if progress is not None:
                progress(len(idx))

    _, used = with_oom_backoff(run_all, batch_size)
    hid = np.stack(pooled) if hidden and texts else None
    return stats, hid, used


class HFLMRelease(LMRelease):
    """A user's causal LM (any ``AutoModelForCausalLM``) with the suite's LM surfaces.

    Adds to :class:`LMRelease`: ``hidden`` (the mean-pooled last-layer hidden state of the
    same forward pass that gives the token statistics, so attribute inference runs on an
    LM); ``token_hidden`` (the per-token output of the input embedding layer, what a client
    of split inference would send for the first layer, with the public embedding table as
    ``vocabulary_embeddings``, so the embedding-inversion attacks run on an LM); length-bucketed batching with CUDA out-of-memory backoff, and batched
    left-padded generation through ``model.generate``.
    """

    surfaces = frozenset(
        {
            Surface.PROBABILITIES,
            Surface.LOSS,
            Surface.GENERATION,
            Surface.GRADIENTS,
            Surface.HIDDEN,
            Surface.TOKEN_HIDDEN,
        }
    )

    def __init__(
        self,
        model,
        tokenizer: HFTokenizer,
        max_length: int,
        claim: PrivacyClaim,
        device: str = "cpu",
        gradient_mechanism=None,
        schedule=None,
        batch_size: int = 32,
        label_names: list[str] | None = None,
        token_budget: int | None = None,
        place_model: bool = True,
    ) -> None:
        from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism
        from privacy_audit.targets.classifier import resolve_device
        from privacy_audit.targets.lm import context_length

        self.model = model
        self.tokenizer = tokenizer
        self.max_length = min(int(max_length), context_length(model))
        self.claim = claim
        self.device = resolve_device(device)
        self.gradient_mechanism = gradient_mechanism or GaussianGradientMechanism(None)
        self.schedule = schedule
        self.batch_size = batch_size
        self.token_budget = token_budget
        self.label_names = list(label_names or [])
        if place_model:  # a device_map-sharded model is already placed
            self.model.to(self.device)
        self.model.eval()
        self._hidden_cache: dict[str, np.ndarray] = {}
        # set before scoring so the shared pass also gives the extraction suffix's decoding
        # log-probabilities (see :meth:`extraction_stats`)
        self.extraction = None

    def _input_device(self) -> torch.device:
        return _input_device(self.model)

    @torch.no_grad()
    def token_stats(self, texts: list[str]) -> list[TokenStats]:
        """:class:`TokenStats` per text; each distinct text runs through the model once per
        release, and the same pass fills :meth:`hidden`'s cache."""
        cache = self.__dict__.setdefault("_token_stats_cache", {})
        todo = list(dict.fromkeys(t for t in texts if t not in cache))
        if todo:
            from privacy_audit.ground.progress import progress_bar

            bar = progress_bar(
                len(todo),
                "scoring (one forward pass per text)",
                bool(getattr(self, "show_progress", False)),
                unit="text",
                leave=False,
            )
            stats, hid, used = score_texts(
                self.model,
                self.tokenizer,
                todo,
                self.max_length,
                self.batch_size,
                self.token_budget,
                hidden=True,
                progress=bar.update,
                extraction=getattr(self, "extraction", None),
            )
            bar.close()
            self.batch_size = used  # keep what fitted
            cache.update(zip(todo, stats, strict=True))
            self._hidden_cache.update(zip(todo, hid, strict=True))
        return [cache[t] for t in texts]

    def extraction_stats(self, texts: list[str], extraction) -> list[TokenStats]:
        """:meth:`token_stats` whose ``decoding_log_probs`` hold ``extraction``'s suffix.

        Free when :attr:`extraction` was set to the same spec before the texts were scored
        (the audit does that); otherwise the texts are scored again, once, with it."""
        cache = self.__dict__.setdefault("_token_stats_cache", {})
        if getattr(self, "extraction", None) != extraction:  # values of another spec: stale
            self.extraction = extraction
            for t, st in cache.items():
                if st.decoding_log_probs is not None:
                    cache[t] = dataclasses.replace(st, decoding_log_probs=None)
        stale = [
            t for t in dict.fromkeys(texts) if t in cache and cache[t].decoding_log_probs is None
        ]
        for t in stale:
            cache.pop(t)
        return self.token_stats(texts)

    def hidden(self, texts: list[str]) -> np.ndarray:
        """Mean-pooled last-layer hidden state over each text's tokens, shape (n, d)."""
        texts = list(texts)
        self.token_stats(texts)
        if not texts:
            return np.zeros((0, int(self.model.config.hidden_size)))
        return np.stack([self._hidden_cache[t] for t in texts])

    def encode(self, texts: list[str], add_eos: bool | None = None):
        """``(input_ids, attention_mask)`` of ``texts`` under the tokenizer's convention
        (``add_eos = False``: prompts, no suffix)."""
        return self.tokenizer.encode(list(texts), self.max_length, add_eos=add_eos)

    def encoding(self) -> dict:
        """The encoding convention and cut length, for results.json and the report."""
        conv = getattr(self.tokenizer, "convention", None)
        out = dict(conv()) if conv is not None else {"encoding": "the suite's LM tokenizer"}
        out["max_length"] = self.max_length
        return out

    def token_ids(self, texts: list[str]) -> list[np.ndarray]:
        """Input token ids of each text (as encoded for scoring), aligned with token_hidden."""
        out = []
        for t in texts:
            ids, _ = self.tokenizer.encode([t], self.max_length)
            out.append(ids[0].numpy())
        return out

    @torch.no_grad()
    def token_hidden(self, texts: list[str]) -> list[np.ndarray]:
        """Input-embedding output per token, shape (L_i, d) per text."""
        emb = self.model.get_input_embeddings()
        dev = emb.weight.device
        return [
            emb(torch.as_tensor(ids, device=dev)).float().cpu().numpy()
            for ids in self.token_ids(texts)
        ]

    def vocabulary_embeddings(self) -> np.ndarray:
        return self.model.get_input_embeddings().weight.detach().float().cpu().numpy()

    def decode_tokens(self, ids) -> list[str]:
        hf = getattr(self.tokenizer, "hf", None)
        if hf is None:  # the suite's own LM tokenizer
            return [self.tokenizer.decode([int(i)]) for i in ids]
        return hf.convert_ids_to_tokens([int(i) for i in ids])

    @torch.no_grad()
    def probabilities(self, texts: list[str]) -> np.ndarray:
        """Next-token distribution after each text (no ``<eos>``), shape (n, V)."""
        rows = []
        dev = self._input_device()
        for i in range(0, len(texts), self.batch_size):
            ids, mask = self.tokenizer.encode(
                texts[i : i + self.batch_size], self.max_length, add_eos=False
            )
            logits = self.model(input_ids=ids.to(dev), attention_mask=mask.to(dev)).logits
            last = (mask.sum(1) - 1).to(logits.device)
            rows.append(
                torch.softmax(logits[torch.arange(len(ids)), last].double(), -1).cpu().numpy()
            )
        return np.concatenate(rows) if rows else np.zeros((0, self.tokenizer.vocab_size))

    next_token_probabilities = probabilities

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
        """Continuation token ids per prompt (stopping at EOS), batched with left padding."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        from privacy_audit.targets.lm import context_length

        n_ctx = context_length(self.model)
        room = n_ctx - max_new_tokens
        if room < 2:
            raise ValueError(
                f"max_new_tokens = {max_new_tokens} leaves no room for a prompt in the "
                f"model's context length {n_ctx}"
            )
        dev = self._input_device()
        results: list[list[int]] = []
        tok = self.tokenizer
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for i in range(0, len(prompts), self.batch_size):
                chunk = list(prompts[i : i + self.batch_size])
                ids, mask = tok.encode(chunk, min(room, self.max_length), False, left_pad=True)
                kw = dict(
                    input_ids=ids.to(dev),
                    attention_mask=mask.to(dev),
                    max_new_tokens=max_new_tokens,
                    do_sample=not greedy,
                    pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id,
                )
                if not greedy:
                    kw.update(temperature=temperature, top_k=top_k or 0)
                else:
                    kw.update(temperature=None, top_k=None, top_p=None)
                out = self.model.generate(**kw)[:, ids.shape[1] :].cpu()
                for row in out.tolist():
                    new = []
                    for t in row:
                        if t == tok.eos_id:
                            break
                        new.append(int(t))
                    results.append(new)
        return results

    def perplexity(self, texts: list[str]) -> float:
        nll = self._token_nll(list(texts))
        total = sum(float(x.sum()) for x in nll)
        count = sum(x.size for x in nll)
        return math.exp(total / max(count, 1))


__all__ = [
    "HFLMRelease",
    "HFTokenizer",
    "forward_stats",
    "is_cuda_oom",
    "length_batches",
    "same_tokenizer",
    "score_batch",
    "score_texts",
    "with_oom_backoff",
]
