"""Every registered attack with its one-line summary, what it needs and its cost: the
``privacy-audit attacks`` listing, and the names ``run --model --attacks`` accepts.

Read from the classes' ``summary`` / ``needs`` / ``cost`` attributes (attacks/base.py) and,
for the shadow / reference attacks (functions of scores, not classes), from
``attacks/shadow.py``'s ``CATALOG``.
"""

from __future__ import annotations

from typing import Any

from privacy_audit.attacks import ATTACKS, LEAKAGE_ATTACKS
from privacy_audit.attacks.base import NEEDS

#: Shortcuts of ``--attacks``: ``llm`` (the causal-LM membership signals) and ``all``.
GROUPS = ("all", "llm")


def catalog(from_classes: bool = False) -> list[dict[str, Any]]:
    """One row per registered attack: name, family, target, summary, needs, cost.

    By default the rows stored in :mod:`privacy_audit.attacks.catalog_rows` (reading the
    classes imports torch: seconds and 290 MB for a listing); ``from_classes`` reads the
    classes themselves, which a test compares with the stored rows (regenerate them with
    ``python -m privacy_audit.attacks.catalog``)."""
    if not from_classes:
        from privacy_audit.attacks.catalog_rows import ROWS

        return [dict(r, needs=tuple(r["needs"])) for r in ROWS]
    rows = []
    for name, cls in ATTACKS.items():
        rows.append(
            {
                "name": name,
                "family": "membership",
                "target": getattr(cls, "target_kind", "classifier"),
                "summary": cls.summary,
                "needs": tuple(cls.needs),
                "cost": cls.cost,
            }
        )
    for name, cls in LEAKAGE_ATTACKS.items():
        rows.append(
            {
                "name": name,
                "family": f"leakage ({cls.kind})",
                "target": "any",
                "summary": cls.summary,
                "needs": tuple(cls.needs),
                "cost": cls.cost,
            }
        )
    from privacy_audit.attacks.shadow import CATALOG as SHADOW_CATALOG
    from privacy_audit.attacks.shadow import SHADOW_ATTACKS

    for name in SHADOW_ATTACKS:
        summary, needs, cost = SHADOW_CATALOG[name]
        rows.append(
            {
                "name": name,
                "family": "shadow / reference",
                "target": "any",
                "summary": summary,
                "needs": tuple(needs),
                "cost": cost,
            }
        )
    for r in rows:
        bad = [n for n in r["needs"] if n not in NEEDS]
        if bad:  # a typo in a class attribute must not pass silently
            raise ValueError(f"attack {r['name']!r} needs {bad[0]!r}, not one of {NEEDS}")
    return rows


def format_catalog(rows: list[dict[str, Any]]) -> str:
    """The listing printed by ``privacy-audit attacks``."""
    lines = []
    family = None
    for r in rows:
        if r["family"].split(" ")[0] != family:
            family = r["family"].split(" ")[0]
            if lines:
                lines.append("")
            lines.append(
                {
                    "membership": "MEMBERSHIP ATTACKS (run --model ... --attacks NAME,...)",
                    "leakage": "LEAKAGE ATTACKS (beyond membership)",
                    "shadow": "SHADOW / REFERENCE ATTACKS (with --reference, or [shadow])",
                }[family]
            )
        target = "" if r["target"] in ("any",) else f" [{r['target']}]"
        lines.append(f"  {r['name']}{target}: {r['summary']}")
        needs = ", ".join(r["needs"]) or "only the model and the texts"
        lines.append(f"      needs: {needs}; cost: {r['cost']}")
    lines.append("")
    lines.append(
        "Shortcuts: --attacks llm (every causal-LM membership signal whose needs are met), "
        "--attacks all (llm plus the extraction attacks that fit the model)."
    )
    return "\n".join(lines)


def applicable(kind: str | None) -> tuple[str, ...]:
    """The ``--attacks`` names that apply to a model of ``kind`` ("causal-lm",
    "classifier"; None: every name), from the stored catalog (no torch)."""
    rows = catalog()
    names = [r["name"] for r in rows if r["name"] not in ("lira-online", "rmia-online")]
    if kind is None:
        return (*GROUPS, *names)
    want = "lm" if kind == "causal-lm" else "classifier"
    keep = [r["name"] for r in rows if r["target"] in (want, "any") and r["name"] in names]
    return (*(GROUPS if kind == "causal-lm" else ("all",)), *keep)


def check_names(spec: str, kind: str | None = None) -> list[str]:
    """The names of ``--attacks``; ValueError naming an unknown one, the name it probably
    meant, and the names that apply to a model of ``kind`` when it is known (checked
    before the model is loaded)."""
    tokens = [t.strip() for t in spec.split(",") if t.strip()]
    valid = (*GROUPS, *ATTACKS, *LEAKAGE_ATTACKS, "lira-offline", "rmia-offline")
    shown = applicable(kind) if kind is not None else valid
    which = f"valid for a {kind}" if kind is not None else "valid"
    if not tokens:
        raise ValueError(f"--attacks names no attack; {which}: {', '.join(shown)}")
    for t in tokens:
        if t not in valid:
            raise ValueError(
                f"unknown attack {t!r} in --attacks{did_you_mean(t, shown)}; {which}: "
                f"{', '.join(shown)} (privacy-audit attacks lists what each needs)"
            )
    return tokens


def did_you_mean(name: str, valid) -> str:
    """``"; did you mean 'ez-mia'?"`` for a near miss (``_`` for ``-``, case, a typo)."""
    import difflib

    norm = {v.lower().replace("_", "-"): v for v in valid}
    key = name.strip().lower().replace("_", "-")
    if key in norm:
        return f"; did you mean {norm[key]!r}?"
    close = difflib.get_close_matches(key, list(norm), n=1, cutoff=0.75)
    return f"; did you mean {norm[close[0]]!r}?" if close else ""


def expand(spec: str, kind: str, have: set[str]) -> tuple[list[str], list[str]]:
    """``--attacks`` as (attack names to run, offline reference attacks to run), for a
    model of ``kind`` ("causal-lm" or "classifier") given the inputs ``have`` (words of
    :data:`NEEDS`: "reference" with --reference, "nonmember-prefixes" and "population"
    with --public). Raises ValueError naming an unknown name and listing the valid ones;
    a named attack runs whatever its needs (its record then says what was missing)."""
    tokens = check_names(spec)
    lm = kind == "causal-lm"
    # a model audited as it is: white box (gradients) and, for a causal LM, generation;
    # a classifier's examples carry their labels
    met = {"generation", "gradients"} | have | (set() if lm else {"labels"})
    if "llm" in tokens and not lm:
        raise ValueError("--attacks llm names the causal-LM signals; this model is a classifier")

    def fits(cls) -> bool:
        return (getattr(cls, "target_kind", "classifier") == "lm") == lm

    names: list[str] = []
    refs: list[str] = []
    for t in tokens:
        if t in ("llm", "all"):
            group = [n for n, c in ATTACKS.items() if fits(c) and set(c.needs) <= met]
            if t == "all" and lm:  # extraction attacks on a causal LM's own texts
                group += [
                    n
                    for n, c in LEAKAGE_ATTACKS.items()
                    if c.kind == "extraction"
                    and set(c.needs) <= met | {"member-prefixes"}
                    and n != "canary-exposure"
                ]
            if t == "all" and "reference" in have:
                refs += ["lira-offline", "rmia-offline"]
            names += group
        elif t in ("lira-offline", "rmia-offline"):
            refs.append(t)
        else:
            names.append(t)
    dedup = list(dict.fromkeys(names))
    return dedup, list(dict.fromkeys(refs))


__all__ = ["GROUPS", "catalog", "check_names", "expand", "format_catalog"]


def write_rows(path=None) -> str:
    """The source of :mod:`privacy_audit.attacks.catalog_rows` from the classes."""
    import pprint
    from pathlib import Path

    rows = [dict(r, needs=list(r["needs"])) for r in catalog(from_classes=True)]
    text = (
        '"""The attack catalog as the classes state it, stored so that listing it imports no\n'
        "torch. Generated by ``python -m privacy_audit.attacks.catalog``; "
        'tests/end_to_end/test_startup.py checks it against the classes."""\n\n'
        f"ROWS = {pprint.pformat(rows, width=100, sort_dicts=False)}\n"
    )
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


if __name__ == "__main__":
    from pathlib import Path

    write_rows(Path(__file__).with_name("catalog_rows.py"))
