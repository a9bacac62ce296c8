"""Bounded work on any text: cut texts to what ``max_length`` tokens can cover before
anything tokenizes them.

Tokenizers truncate only after tokenizing the whole text, so one 20 MB line with
``max_length = 16`` used to take minutes and gigabytes. No tokenizer this suite uses
(word-level, character-level, WordPiece, byte-level BPE) makes a token from more than
:data:`CHARS_PER_TOKEN` characters of ordinary text, so the first ``max_length *
CHARS_PER_TOKEN`` characters always hold the first ``max_length`` tokens and the cut never
changes what the model sees, except for texts with runs of more than that many characters
per token (long whitespace runs), which are cut earlier than the tokenizer would cut them.
This is the one place the cap lives (data loading calls it; the other loaders should too).
"""

from __future__ import annotations

from dataclasses import replace

#: Tokens per text at most, for a model audited as it is and for a scores file's texts
#: (``audit.config.MAX_LENGTH_CAP``; here so that ``score`` reads it without the config's
#: imports, which load torch).
MAX_LENGTH_CAP = 512
#: Characters kept per token of ``max_length`` (generous: English words average ~5).
CHARS_PER_TOKEN = 64


def char_cap(max_tokens: int) -> int:
    """Characters kept for ``max_tokens`` tokens."""
    return max(int(max_tokens), 1) * CHARS_PER_TOKEN


def cap_text(text: str, max_tokens: int) -> str:
    """``text`` cut to :func:`char_cap` characters (unchanged when shorter)."""
    limit = char_cap(max_tokens)
    return text if len(text) <= limit else text[:limit]


def cap_texts(texts: list[str], max_tokens: int) -> list[str]:
    return [cap_text(t, max_tokens) for t in texts]


def cap_audit_data(data, max_tokens: int):
    """An ``AuditData`` whose every split's texts are capped (a new object; the input is
    not modified, so a cached copy stays valid)."""

    def cap(ex):
        if ex is None:
            return None
        texts = cap_texts(ex.texts, max_tokens)
        return ex if texts == ex.texts else replace(ex, texts=texts)

    return replace(
        data,
        members=cap(data.members),
        nonmembers=cap(data.nonmembers),
        test=cap(data.test),
        public=cap(data.public),
    )
