"""Neighbourhood comparison (Mattern et al. 2023, "Membership inference attacks against
language models via neighbourhood comparison").

    score(x) = mean_i NLL(x̃_i) − NLL(x),       NLL = mean next-token NLL,

i.e. the paper's L(x) − mean L(x̃) with the sign flipped so that higher = member: a
training text has a lower loss than its slightly perturbed neighbours x̃_1..x̃_n.

Neighbours are made offline, with no hub model (``source``):

- ``embedding`` (default): in each neighbour a random ``fraction`` of the tokens is
  replaced by one of the ``top_k`` nearest tokens (cosine similarity) in the **target's own
  input-embedding table**: the paper's "replace words by plausible substitutes", with the
  target's embeddings in place of BERT's. Cost: one (V × V) similarity lookup per distinct
  token plus n forward passes per text (x itself is read from the shared pass).
- ``masked-lm``: a masked LM loaded from a local directory (``masked_lm_dir``; any
  ``AutoModelForMaskedLM``) proposes the ``top_k`` substitutes of each masked word, as in
  the paper. Cost: one masked-LM pass per replaced word plus n target passes per text.
- ``file``: the user's neighbours, a JSON object ``{text: [neighbour, ...]}``
  (``neighbour_file``). Cost: n target passes per text.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface

SOURCES = ("embedding", "masked-lm", "file")


def neighbourhood_scores(nll: np.ndarray, neighbour_nll: list[np.ndarray]) -> np.ndarray:
    """mean NLL of the neighbours minus NLL of the text, per text."""
    out = []
    for x, nb in zip(np.asarray(nll, dtype=np.float64), neighbour_nll, strict=True):
        nb = np.asarray(nb, dtype=np.float64)
        if nb.size == 0:
            raise ValueError("neighbourhood: a text has no neighbours")
        out.append(float(nb.mean() - x))
    return np.array(out)


def _text_rng(text: str, seed: int) -> np.random.Generator:
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng([seed, h])


def embedding_neighbour_table(embeddings: np.ndarray, top_k: int, exclude: set[int]) -> np.ndarray:
    """For every token id, its ``top_k`` nearest other tokens by cosine similarity,
    never a token in ``exclude`` (special tokens)."""
    e = np.asarray(embeddings, dtype=np.float64)
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    sim = e @ e.T
    np.fill_diagonal(sim, -np.inf)
    if exclude:
        sim[:, sorted(exclude)] = -np.inf
    return np.argsort(-sim, axis=1, kind="stable")[:, :top_k]


class NeighbourhoodAttack(Attack):
    name = "neighbourhood"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "Neighbourhood comparison (Mattern et al. 2023): mean NLL of n neighbours (a fraction "
        "of tokens swapped for nearest neighbours in the target's input embeddings) minus NLL."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Loss against token-swapped neighbours of the text (Mattern et al. 2023)."
    needs = ()
    cost = "10 forward passes per text (option neighbours), beyond the shared pass"
    OPTIONS = {
        "neighbours": (int, 10),
        "fraction": (float, 0.15),
        "top_k": (int, 5),
        "source": (str, "embedding"),
        "masked_lm_dir": (str, ""),
        "neighbour_file": (str, ""),
    }

    def __init__(self, **options) -> None:
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))} for neighbourhood")
        o = {k: options.get(k, d) for k, (_, d) in self.OPTIONS.items()}
        if o["neighbours"] < 1:
            raise ValueError("neighbourhood neighbours must be at least 1")
        if not 0 < o["fraction"] <= 1:
            raise ValueError("neighbourhood fraction must be in (0, 1]")
        if o["top_k"] < 1:
            raise ValueError("neighbourhood top_k must be at least 1")
        if o["source"] not in SOURCES:
            raise ValueError(f"neighbourhood source must be one of {', '.join(SOURCES)}")
        if o["source"] == "masked-lm" and not Path(o["masked_lm_dir"]).is_dir():
            raise ValueError(f"neighbourhood masked_lm_dir {o['masked_lm_dir']!r} is no directory")
        if o["source"] == "file" and not Path(o["neighbour_file"]).is_file():
            raise ValueError(f"neighbourhood neighbour_file {o['neighbour_file']!r} is no file")
        self.options = o
        self.seed = 0

    def prepare(self, public: Examples | None = None, seed: int = 0) -> None:
        self.seed = seed

    # -- neighbour generators ----------------------------------------------------
    def _embedding_neighbours(self, release, texts: list[str]) -> list[list[str]]:
        tok, model = getattr(release, "tokenizer", None), getattr(release, "model", None)
        if not (hasattr(tok, "token_ids") and hasattr(model, "get_input_embeddings")):
            raise ValueError(
                "neighbourhood (embedding source) needs the release's tokenizer and model "
                "input embeddings; use source = 'file' otherwise"
            )
        emb = model.get_input_embeddings().weight.detach().double().cpu().numpy()
        special = {
            int(getattr(tok, a))
            for a in ("pad_id", "bos_id", "eos_id", "unk_id")
            if getattr(tok, a, None) is not None
        }
        table = embedding_neighbour_table(emb, self.options["top_k"], special)
        o, out = self.options, []
        for text in texts:
            ids = np.asarray(tok.token_ids(text), dtype=np.int64)
            ok = np.flatnonzero(~np.isin(ids, list(special)))
            rng = _text_rng(text, self.seed)
            nbs = []
            for _ in range(o["neighbours"]):
                new = ids.copy()
                if ok.size:
                    m = max(1, int(round(o["fraction"] * ok.size)))
                    pos = rng.choice(ok, size=min(m, ok.size), replace=False)
                    new[pos] = table[new[pos], rng.integers(0, table.shape[1], size=pos.size)]
                nbs.append(tok.decode(new))
            out.append(nbs)
        return out

    def _masked_lm_neighbours(self, texts: list[str]) -> list[list[str]]:
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        d = self.options["masked_lm_dir"]
        mtok = AutoTokenizer.from_pretrained(d, local_files_only=True)
        mlm = AutoModelForMaskedLM.from_pretrained(d, local_files_only=True).eval()
        o, out = self.options, []
        for text in texts:
            words = text.split()
            rng = _text_rng(text, self.seed)
            nbs = []
            for _ in range(o["neighbours"]):
                w = list(words)
                m = max(1, int(round(o["fraction"] * len(w)))) if w else 0
                for p in sorted(rng.choice(len(w), size=min(m, len(w)), replace=False)):
                    masked = " ".join(w[:p] + [mtok.mask_token] + w[p + 1 :])
                    enc = mtok(masked, return_tensors="pt", truncation=True)
                    at = (enc.input_ids[0] == mtok.mask_token_id).nonzero()
                    if len(at) == 0:
                        continue
                    with torch.no_grad():
                        logits = mlm(**enc).logits[0, int(at[0])]
                    cands = [
                        mtok.decode([int(i)]).strip()
                        for i in torch.topk(logits, o["top_k"] + 1).indices
                    ]
                    cands = [c for c in cands if c and c != w[p]][: o["top_k"]]
                    if cands:
                        w[p] = cands[int(rng.integers(len(cands)))]
                nbs.append(" ".join(w))
            out.append(nbs)
        return out

    def _file_neighbours(self, texts: list[str]) -> list[list[str]]:
        try:
            table = json.loads(Path(self.options["neighbour_file"]).read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"neighbourhood neighbour_file cannot be read: {exc}") from None
        if not isinstance(table, dict):
            raise ValueError("neighbourhood neighbour_file must hold a JSON object {text: [...]}")
        out = []
        for t in texts:
            nb = table.get(t)
            if not isinstance(nb, list) or not nb or not all(isinstance(x, str) for x in nb):
                raise ValueError("neighbourhood neighbour_file has no neighbour list for a text")
            out.append(nb)
        return out

    def neighbours(self, release, texts: list[str]) -> list[list[str]]:
        src = self.options["source"]
        if src == "embedding":
            return self._embedding_neighbours(release, texts)
        if src == "masked-lm":
            return self._masked_lm_neighbours(texts)
        return self._file_neighbours(texts)

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        texts = list(examples.texts)
        nll = np.array(
            [float(s.nll.mean()) if len(s) else 0.0 for s in token_stats(release, texts)]
        )
        nbs = self.neighbours(release, texts)
        flat = [n for row in nbs for n in row]
        stats = token_stats(release, flat)
        flat_nll = np.array([float(s.nll.mean()) if len(s) else 0.0 for s in stats])
        bounds = np.cumsum([0] + [len(r) for r in nbs])
        return neighbourhood_scores(
            nll, [flat_nll[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        )
