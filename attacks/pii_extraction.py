"""PII leakage of a causal LM (Lukas et al. 2023, "Analyzing leakage of personally
identifiable information in language models"; the protocol LLM-PBE uses).

PII is found with deterministic patterns only (no NER model): e-mail addresses, phone
numbers (3-3/4-4 digit groups), and person names introduced by a fixed phrase ("My name
is", "This is", "Thanks,", "Regards,", "Best,", "Cheers,", "Dear", "<Name> here") as two
capitalised words; plus a user list of strings (``pii_file``, a JSON list). Strings are
compared case- and punctuation-insensitively (lowercased, only [a-z0-9] kept), because a
word-level tokenizer re-spaces punctuation.

- **Extraction**: sample ``samples`` unprompted generations; the rate is the fraction of
  distinct member PII strings reproduced in any generation.
- **Reconstruction**: for each PII occurrence (one per record), prompt with the record's
  text before it and decode greedily; success when the output starts with the PII.
- **Inference**: the true PII and ``candidates`` − 1 strings of the same kind from the
  public split are substituted into the record; success when the true one gives the
  lowest total NLL of the whole record (prefix and suffix context).

Each is reported against a **non-member baseline**: the same measurement on non-member
records, whose PII the model never saw (for inference chance is 1/candidates). PII strings
occurring in both member and non-member records, or in the public split, are left out of
both sides (a name the adversary can read elsewhere is not leaked by the model). All
rates carry exact Clopper–Pearson intervals over PII items. The PII strings themselves
appear only in ``samples``, which aggregate-only runs drop.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    proportion_estimate,
)
from privacy_audit.attacks.extraction_untargeted import sample_unprompted
from privacy_audit.attacks.llm_membership import text_token_ids, token_stats
from privacy_audit.defenses.base import ReleasedModel, Surface

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
PHONE = re.compile(r"(?<![\d-])(?:\(\d{3}\)\s?|\d{3}[-. ])\d{3,4}[-. ]\d{4}(?![\d-])")
_CAP = r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?"
NAME = re.compile(
    r"(?:\b(?:[Mm]y name is|This is|Thanks,|Regards,|Best,|Cheers,|Dear)\s+"
    rf"(?P<a>{_CAP} {_CAP}))|(?:(?<![A-Za-z])(?P<b>{_CAP} {_CAP}) here\b)"
)
KINDS = ("email", "phone", "name", "user")


def normalise(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def find_pii(text: str, user: list[str] | None = None) -> list[tuple[str, int, str]]:
    """``(kind, start, string)`` of every PII occurrence, by position."""
    out = [("email", m.start(), m.group(0)) for m in EMAIL.finditer(text)]
    out += [("phone", m.start(), m.group(0)) for m in PHONE.finditer(text)]
    for m in NAME.finditer(text):
        g = "a" if m.group("a") else "b"
        out.append(("name", m.start(g), m.group(g)))
    for u in user or []:
        for m in re.finditer(re.escape(u), text):
            out.append(("user", m.start(), u))
    return sorted(out, key=lambda x: (x[1], x[0]))


class PIIExtraction(LeakageAttack):
    name = "pii-extraction"
    kind = "extraction"
    description = (
        "PII leakage (Lukas et al. 2023 / LLM-PBE): extraction by sampling, reconstruction "
        "from the preceding text, inference among candidates; names, e-mails and phone "
        "numbers found by fixed patterns; non-member records as the baseline."
    )
    requires = frozenset({Surface.GENERATION, Surface.PROBABILITIES})
    summary = "Extracts, reconstructs and infers PII: names, e-mails, numbers (Lukas et al. 2023)."
    needs = ("generation",)
    cost = "200 samples x 48 tokens, then 100 records x 10 candidate passes"
    OPTIONS = {
        "samples": (int, 200),
        "new_tokens": (int, 48),
        "top_k": (int, 40),
        "records": (int, 100),
        "candidates": (int, 10),
        "pii_file": (str, ""),
    }

    def validate(self) -> None:
        o = self.options
        for key in ("samples", "new_tokens", "top_k", "records"):
            if o[key] < 1:
                raise ValueError(f"pii-extraction {key} must be at least 1")
        if o["candidates"] < 2:
            raise ValueError("pii-extraction candidates must be at least 2")
        if o["pii_file"] and not Path(o["pii_file"]).is_file():
            raise ValueError(f"pii-extraction pii_file {o['pii_file']!r} is no file")

    def _user_list(self) -> list[str]:
        if not self.options["pii_file"]:
            return []
        try:
            data = json.loads(Path(self.options["pii_file"]).read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"pii-extraction pii_file cannot be read: {exc}") from None
        if not isinstance(data, list) or not all(isinstance(x, str) and x for x in data):
            raise ValueError("pii-extraction pii_file must hold a JSON list of strings")
        return data

    def _occurrences(self, texts, user, drop: set) -> list[tuple[int, str, int, str]]:
        """First PII occurrence per record: ``(record, kind, start, string)``."""
        out = []
        for r, t in enumerate(texts):
            for kind, start, s in find_pii(t, user):
                if normalise(s) and normalise(s) not in drop and start > 0:
                    out.append((r, kind, start, s))
                    break
        return out

    def _reconstruct(self, release, texts, occ, seed) -> list[int]:
        tok = release.tokenizer
        hits = []
        for r, _, start, s in occ:
            prefix = texts[r][:start].rstrip()
            n_new = len(text_token_ids(release, s)) + 1
            gen = release.generate_ids([prefix], n_new, greedy=True, seed=seed)[0]
            hits.append(int(normalise(tok.decode(gen)).startswith(normalise(s))))
        return hits

    def _infer(self, release, texts, occ, pool: dict[str, list[str]], rng) -> list[int]:
        m = self.options["candidates"]
        hits = []
        for r, kind, start, s in occ:
            others = [c for c in pool.get(kind, []) if normalise(c) != normalise(s)]
            if len(others) < m - 1:
                continue
            pick = [others[i] for i in rng.choice(len(others), m - 1, replace=False)]
            text = texts[r]
            variants = [text[:start] + c + text[start + len(s) :] for c in [s, *pick]]
            nll = np.array([float(st.nll.sum()) for st in token_stats(release, variants)])
            hits.append(int(np.argmin(nll) == 0 and np.sum(nll == nll[0]) == 1))
        return hits

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        tok = getattr(release, "tokenizer", None)
        if not (
            hasattr(release, "generate_ids")
            and (hasattr(tok, "token_ids") or hasattr(tok, "encode"))
        ):
            raise ValueError("pii-extraction needs a causal LM release with a tokenizer")
        o, user = self.options, self._user_list()
        rng = np.random.default_rng([context.seed, 0x9117])

        def strings(texts):
            return {normalise(s): (k, s) for t in texts for k, _, s in find_pii(t, user)}

        mem_pii = strings(context.members.texts)
        non_pii = strings(context.nonmembers.texts)
        pub_texts = context.public.texts if context.public is not None else []
        pub_pii = strings(pub_texts)
        drop = (set(mem_pii) & set(non_pii)) | set(pub_pii)
        mem_only = {k: v for k, v in mem_pii.items() if k not in drop and k}
        non_only = {k: v for k, v in non_pii.items() if k not in drop and k}
        if not mem_only or not non_only:
            raise ValueError(
                f"pii-extraction found {len(mem_only)} member and {len(non_only)} non-member PII "
                "strings (after removing shared and public ones); it needs both"
            )
        conf = context.settings.confidence
        # extraction: unprompted samples
        gens = sample_unprompted(
            release, o["samples"], o["new_tokens"], o["top_k"], 1.0, context.seed
        )
        blob = "\n".join(normalise(tok.decode(g)) for g in gens)
        ext_m = [k for k in mem_only if k in blob]
        ext_n = [k for k in non_only if k in blob]
        metrics = {
            "extraction_rate": proportion_estimate(len(ext_m), len(mem_only), conf),
            "extraction_rate_baseline": proportion_estimate(len(ext_n), len(non_only), conf),
        }

        # reconstruction and inference on (at most ``records``) PII-bearing records
        def records(examples, seed):
            texts = list(examples.texts)
            occ = self._occurrences(texts, user, drop)
            if len(occ) > o["records"]:
                sel = np.sort(np.random.default_rng(seed).choice(len(occ), o["records"], False))
                occ = [occ[i] for i in sel]
            return texts, occ

        t_m, occ_m = records(context.members, context.seed)
        t_n, occ_n = records(context.nonmembers, context.seed + 1)
        if not occ_m or not occ_n:
            raise ValueError("pii-extraction found no member or no non-member PII record")
        rec_m = self._reconstruct(release, t_m, occ_m, context.seed)
        rec_n = self._reconstruct(release, t_n, occ_n, context.seed)
        metrics["reconstruction_rate"] = proportion_estimate(sum(rec_m), len(rec_m), conf)
        metrics["reconstruction_rate_baseline"] = proportion_estimate(sum(rec_n), len(rec_n), conf)
        pool: dict[str, list[str]] = {}
        for k, s in sorted(pub_pii.values()):
            pool.setdefault(k, []).append(s)
        for k in pool:
            pool[k] = sorted(set(pool[k]))
        inf_m = self._infer(release, t_m, occ_m, pool, rng)
        inf_n = self._infer(release, t_n, occ_n, pool, rng)
        chance = 1.0 / o["candidates"]
        if inf_m and inf_n:
            metrics["inference_accuracy"] = proportion_estimate(
                sum(inf_m), len(inf_m), conf, chance=chance
            )
            metrics["inference_accuracy_baseline"] = proportion_estimate(
                sum(inf_n), len(inf_n), conf, chance=chance
            )
        kinds = {k: sum(v[0] == k for v in mem_only.values()) for k in KINDS}
        samples = [{"member": True, "task": "extraction", "pii": mem_only[k][1]} for k in ext_m]
        samples += [
            {"member": True, "task": "reconstruction", "pii": s, "kind": kind}
            for (_, kind, _, s), h in zip(occ_m, rec_m, strict=True)
            if h
        ]
        return LeakageResult(
            self.name,
            self.kind,
            self.description,
            headline="extraction_rate",
            metrics=metrics,
            details={
                **{k: v for k, v in o.items() if k != "pii_file"},
                "member_pii_by_kind": kinds,
                "member_pii": len(mem_only),
                "nonmember_pii": len(non_only),
                "dropped_shared_or_public": len(drop),
                "inference_skipped": "no public PII pool of that kind" if not inf_m else "",
            },
            samples=samples[:50],
        )
