"""The names and shapes of the bundled targets, without importing torch: config checks
and the command line read them before anything is built."""

from __future__ import annotations

from typing import Any

#: The bundled small causal LMs (targets/lm.py builds them).
LM_PRESETS: dict[str, dict[str, Any]] = {
    "tiny-gpt2": dict(tokenizer="char", n_embd=64, n_layer=2, n_head=2, n_positions=512),
    "tiny-gpt2-word": dict(tokenizer="word", n_embd=64, n_layer=2, n_head=2, n_positions=512),
}
