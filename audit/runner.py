"""The audit pipeline: defense → released surfaces → attacks → scores → metrics → results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privacy_audit.attacks import AttackResult, MetricSettings
from privacy_audit.audit.evaluate import (
    LONG_BOOTSTRAP,
    epsilon_settings,
    log_progress,
    metric_settings,
    tenths,
)
from privacy_audit.audit.results import assemble_results, new_id_salt, run_record
from privacy_audit.audit.timing import stage
from privacy_audit.defenses.base import PrivacyClaim
from privacy_audit.ground.errors import AuditError, DataError
from privacy_audit.stats.scores import bootstrap_progress

if TYPE_CHECKING:  # annotations only: importing config loads torch
    from privacy_audit.audit.config import AuditConfig


def run_audit(
    cfg: AuditConfig,
    progress: bool = True,
    epsilon: bool | None = None,
    executor=None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the audit. ``epsilon`` turns the claimed-vs-audited ε audits on or off
    (default: the config's ``epsilon.enabled``). ``executor`` (an
    ``privacy_audit.audit.scale.executors.ExecutorSpec``; default: the config's ``[executor]``) runs the
    training tasks; ``run_dir`` keeps each finished task, and ``resume`` reuses them."""
    from privacy_audit.audit.epsilon.claimed_vs_audited import epsilon_audit
    from privacy_audit.audit.target_resolution import resolve_targets

    cfg = resolve_targets(cfg)
    do_epsilon = cfg.epsilon.get("enabled", False) if epsilon is None else epsilon
    id_salt = new_id_salt() if cfg.aggregate_only else None  # never written anywhere
    eps_settings = epsilon_settings(cfg)
    settings = metric_settings(cfg)
    runs: list[dict[str, Any]] = []
    if cfg.classifier_dir is not None:  # target.audit_dir: the user's model as it is
        from privacy_audit.audit.own_model import audit_own_model
        from privacy_audit.audit.scale.executors import RunDir
        from privacy_audit.audit.scale.fingerprint import (
            input_fingerprints,
            note_changes,
            save_manifest,
        )

        rd = RunDir(run_dir) if run_dir is not None else None
        # contents of the model, references, base, population and data (cached per file)
        inputs = input_fingerprints(cfg) if rd is not None else {}
        note_changes(rd, inputs, resume, lambda m: log_progress(m, progress))
        run, release = audit_own_model(cfg, settings, progress, id_salt, executor, run_dir, resume)
        save_manifest(rd, inputs)
        if do_epsilon:
            log_progress(
                "  epsilon audits (no input canaries: the model was trained outside the suite)",
                progress,
            )
            with stage("ε audits"):
                run["epsilon_audit"] = epsilon_audit(run, release, None, eps_settings)
        runs.append(run)
    else:
        # Training audits run as tasks (audit/scale/plan.py): in-process by default, or on a
        # process pool or Ray, resumable from a run directory.
        from privacy_audit.audit.scale.plan import run_planned

        return run_planned(cfg, progress, epsilon, executor, run_dir, resume)
    with stage("verdicts"):
        return assemble_results(runs, cfg.title, cfg.seed, cfg.to_dict(), cfg.aggregate_only)


#: the member column's values (after strip and lower case)
_MEMBER = {"0": 0, "1": 1, "true": 1, "false": 0}
#: a score as written in a CSV: an ASCII decimal number (Python's float() also takes
#: "1_000" and non-ASCII digits, which no CSV writer means as a number), or nan/inf,
#: which are refused as non-finite with their count
_SCORE = re.compile(
    r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:nan|inf|infinity)", re.I | re.A
)


def _member_value(v: str | None) -> int | None:
    """0/1 from a member cell: 0, 1, true, false, and 0.0 / 1.0 (a float column), as
    ``[data]``'s member column reads them."""
    from privacy_audit.audit.data import label_key

    key = (v or "").strip().lower()
    if key in _MEMBER:
        return _MEMBER[key]
    return _MEMBER.get(label_key(key)) if key else None


def _score_value(v: str | None) -> float:
    if v is None or not _SCORE.fullmatch(v.strip()):
        raise ValueError(v)
    return float(v)


def score_file(
    path: str | Path,
    delta: float,
    n_boot: int = 1000,
    seed: int = 0,
    aggregate_only: bool = False,
    group_column: str | None = None,
) -> dict[str, Any]:
    """Bring-your-own scores: a CSV with columns ``score,member`` and optional ``id`` and
    ``text``. With ``text``, non-member rows whose text equals a member's (exact duplicates)
    are removed and counted in ``run["exact_duplicates"]``; a repeated column name is
    refused.

    ``group_column`` names each row's user (person), as ``run --group-by``: every user on
    one side, at least 4 users a side (``audit/data.py`` ``MIN_USERS_PER_SIDE``); then the
    per-text metrics' intervals resample users, the family-wise test relabels users,
    copies collapse only within a user, and the run gets the ``users`` section of the
    own-model audit (audit/users.py: each user's scores aggregated per user, the per-user
    p-values, the users most exposed). Cleaning that leaves a user with no row is refused.

    ``aggregate_only`` pseudonymises the ids (see the module docstring)."""
    from privacy_audit.audit.data import check_input_file

    p = Path(path)
    check_input_file(p, "scores file", dirs=False)
    if not 0 < delta < 1:
        raise AuditError(f"--delta must be in (0, 1), got {delta}")
    header, rows = _read_scores_csv(p)
    _check_scores_columns(p, header, rows, group_column)
    column = _column_reader(header, rows)
    score_col, member_col = column("score"), column("member")
    ids = [v or str(i) for i, v in enumerate(column("id"))]
    texts = column("text")
    if "text" in header:
        texts = _capped_texts(p, texts)
    scores, members = _scores_and_members(p, score_col, member_col)
    if len(set(ids)) != len(ids):
        from collections import Counter

        dup = next(i for i, c in Counter(ids).items() if c > 1)
        raise DataError(f"scores file {str(p)!r} has duplicate id {dup!r}; ids must be unique")
    s = np.asarray(scores)
    if not np.all(np.isfinite(s)):
        raise DataError(
            f"scores file {str(p)!r} has {int((~np.isfinite(s)).sum())} NaN or infinite score(s)"
        )
    users = None
    if group_column is not None:
        users = _score_users(column(group_column), members, group_column, p)
    duplicates = None
    split = None
    if "text" in header:  # optional: non-members that repeat a member's text are dropped
        s, members, ids, texts, users, duplicates = _drop_member_copies(
            texts, s, members, ids, p, users, group_column
        )
        # copies of one record inside a side (and a user) are one record
        s, members, ids, texts, users, within = _collapse_within(texts, s, members, ids, p, users)
        # texts given: the split check runs first (stats/split_check.py)
        s, members, ids, split, kept = _score_split_check(
            [t or "" for t in texts], s, members, ids, seed, aggregate_only, p, users
        )
        users = None if users is None else _users_kept(users, kept, group_column, p)
        split[0]["duplicates"].update(within)
    settings = MetricSettings(delta=delta, n_boot=n_boot, seed=seed)
    run = _scores_run(p, s, members, ids, settings, aggregate_only, users, group_column)
    if split is not None:
        from privacy_audit.stats.split_check import compare_attacks

        check, blind = split
        if blind is not None:
            check["attacks"] = compare_attacks(check, run["attacks"], blind, users)
        run["split_check"] = check
    if duplicates is not None:
        run["exact_duplicates"] = duplicates
    config = {
        "source": str(p),
        "command": "score",
        "delta": delta,
        "bootstrap": n_boot,
        "seed": seed,
        "aggregate_only": aggregate_only,
        "group": group_column,
    }
    return assemble_results([run], f"Privacy audit of {p.name}", seed, config, aggregate_only)


def _read_scores_csv(p: Path) -> tuple[list[str], list[list[str]]]:
    """The header and the non-blank rows of a scores file; a repeated column name, a file
    that is not UTF-8 or not CSV is refused."""
    import csv

    from privacy_audit.audit.data import csv_reader

    try:
        # newline="": str.splitlines() would also split quoted ids on \x0c, \x85, \u2028 ...
        text = p.read_bytes().decode("utf-8-sig")
        # csv.reader and columns, not a dict per row (10^6 rows); the same rules as
        # csv.DictReader: blank lines skipped, a short row's missing cells are None. A field
        # of any length is read (a long text column; cut like run cuts texts, below).
        reader = csv_reader(text)
        header = next(reader, None)
        while header == []:
            header = next(reader, None)
        header = header or []
        seen_cols: set[str] = set()
        for col in header:
            if col.strip() in seen_cols:  # a dict per row would keep the last one silently
                raise DataError(
                    f"scores file {str(p)!r} has the column {col.strip()!r} twice; "
                    "column names must be unique"
                )
            seen_cols.add(col.strip())
        rows = [r for r in reader if r]
    except UnicodeDecodeError:
        raise DataError(f"scores file {str(p)!r} is not UTF-8 text") from None
    except csv.Error as exc:  # e.g. a field over the csv module's 128 KiB limit
        raise DataError(f"scores file {str(p)!r} is not valid CSV: {exc}") from None
    return header, rows


def _check_scores_columns(
    p: Path, header: list[str], rows: list[list[str]], group_column: str | None
) -> None:
    """Rows, the ``score`` and ``member`` columns (and the ``--group-by`` one), and no row
    with more fields than the header names."""
    if not rows:
        raise DataError(f"scores file {str(p)!r} has no rows")
    for col in ("score", "member"):
        if col not in header:
            raise DataError(
                f"scores file {str(p)!r} has no column {col!r}; expected columns: score,member[,id]"
            )
    if group_column is not None and group_column not in header:
        raise DataError(
            f"scores file {str(p)!r} has no group (user) column {group_column!r} (--group-by); "
            f"its columns: {','.join(header)}"
        )
    width = len(header)
    for i, r in enumerate(rows):
        if len(r) > width:  # a value with no column: a misquoted comma, a shifted row
            raise DataError(
                f"scores file {str(p)!r}: a row holds {len(r)} fields but the header names "
                f"{width} ({','.join(header)}); quote fields that contain a comma "
                f"(data row {i + 1})"
            )


def _column_reader(header: list[str], rows: list[list[str]]):
    """``column(name)``: that column's cells, ``None`` for a short row's missing cell (and
    for every row when the header does not name it)."""
    width = len(header)

    def column(name: str) -> list[str | None]:
        if name not in header:
            return [None] * len(rows)
        k = header.index(name)
        if all(len(r) >= width for r in rows):
            return [r[k] for r in rows]
        return [r[k] if len(r) > k else None for r in rows]

    return column


def _capped_texts(p: Path, texts: list[str | None]) -> list[str | None]:
    """The ``text`` column, refused when empty in every row, each text cut like run cuts
    texts: bounded work on a multi-MB field (audit/textcap.py)."""
    from privacy_audit.audit.textcap import MAX_LENGTH_CAP, cap_text  # no torch

    if all(not (t or "").strip() for t in texts):
        raise DataError(
            f"scores file {str(p)!r}: column 'text' is empty in all {len(texts)} rows; "
            "fill it in or leave the column out"
        )
    return [None if t is None else cap_text(t, MAX_LENGTH_CAP) for t in texts]


def _scores_and_members(p: Path, score_col, member_col) -> tuple[list[float], list[int]]:
    """Each row's score (a number) and member value (0/1); the first bad row is named."""
    try:
        scores = list(map(_score_value, score_col))
        members = [_member_value(v) for v in member_col]
        if None in members:
            raise KeyError
    except (TypeError, ValueError, KeyError):  # the first bad row, as a row-by-row reading
        for i, (sc, mv) in enumerate(zip(score_col, member_col, strict=True), start=2):
            try:
                _score_value(sc)
            except (TypeError, ValueError):
                raise DataError(
                    f"scores file {str(p)!r} line {i}: score {sc!r} is not a number"
                ) from None
            if _member_value(mv) is None:
                raise DataError(
                    f"scores file {str(p)!r} line {i}: member must be 0/1 or true/false, got {mv!r}"
                ) from None
        raise
    return scores, members


def _drop_member_copies(texts, s, members, ids, p, users, group_column):
    """Non-member rows whose text equals a member's (exact duplicates) are dropped, and
    counted for ``run["exact_duplicates"]``; refused when every non-member is one."""
    from privacy_audit.audit.data import cross_duplicates

    m_idx = [i for i, m in enumerate(members) if m == 1]
    n_idx = [i for i, m in enumerate(members) if m == 0]
    drop = {
        n_idx[j]
        for j in cross_duplicates([texts[i] or "" for i in m_idx], [texts[i] or "" for i in n_idx])
    }
    if drop and len(drop) == len(n_idx):
        raise DataError(
            f"scores file {str(p)!r}: every one of the {len(n_idx)} non-member texts is "
            "also a member text (exact duplicates); no membership can be measured"
        )
    duplicates = {
        "removed_nonmembers": len(drop),
        "nonmembers_before": len(n_idx),
        "where": "at loading",
    }
    if drop:
        keep = [i for i in range(len(members)) if i not in drop]
        s = s[keep]
        members = [members[i] for i in keep]
        ids = [ids[i] for i in keep]
        texts = [texts[i] for i in keep]
        users = None if users is None else _users_kept(users, keep, group_column, p)
    return s, members, ids, texts, users, duplicates


def _scores_run(p: Path, s, members, ids, settings, aggregate_only, users, group_column) -> dict:
    """The run record of the supplied scores (metrics with their intervals) and, with
    users, the users section of the own-model audit."""
    report = tenths("  score: bootstrap") if settings.n_boot >= LONG_BOOTSTRAP else None
    try:
        with bootstrap_progress(report):
            result = AttackResult.from_scores(
                "user-scores", s, members, ids, settings, "Scores supplied by the user."
            )
    except ValueError as exc:
        raise DataError(f"scores file {str(p)!r}: {exc}") from None
    id_salt = new_id_salt() if aggregate_only else None  # never written anywhere
    run = run_record(
        p.stem,
        "user-scores",
        PrivacyClaim.none("Scores supplied by the user; no claim stated."),
        None,
        [result],
        aggregate_only=aggregate_only,
        id_salt=id_salt,
    )
    if users is not None:  # rows in the record's order: the user of stored example i
        from privacy_audit.audit.users import users_section

        def no_fresh() -> tuple[list, dict[str, Any]]:
            return [], {
                "reason": "a scores file holds no model: user inference from fresh texts was "
                "not tested"
            }

        run["users"] = users_section(
            run,
            users,
            np.asarray(members, dtype=np.int64),
            group_column,
            settings,
            no_fresh,
            aggregate_only,
            id_salt,
            progress=False,
        )
    return run


def _collapse_within(texts, s, members, ids, p, users=None):
    """Rows whose texts are exact or near copies inside one side (members, or non-members)
    keep their first row only (:func:`privacy_audit.audit.data.distinct_records`), with
    the counts; fewer than 2 distinct records on a side is refused. With ``users`` only
    copies within one user collapse (two people who wrote one text keep theirs), so no
    user loses every row."""
    from privacy_audit.audit.data import distinct_records

    keep: list[int] = []
    info = {}
    for side, label in (("members", 1), ("nonmembers", 0)):
        rows = [i for i, m in enumerate(members) if m == label]
        k, counts = distinct_records(
            [texts[i] or "" for i in rows], None if users is None else [users[i] for i in rows]
        )
        if counts["distinct"] < 2:
            raise DataError(
                f"scores file {str(p)!r}: the {counts['texts']} {side[:-1]} texts hold "
                f"{counts['distinct']} distinct record(s) after collapsing exact and "
                "near-duplicates; every statistic needs at least 2 distinct records per side"
            )
        keep += [rows[j] for j in k]
        info[f"within_{side}"] = counts
    if len(keep) == len(members):
        return s, members, ids, texts, users, info
    keep.sort()
    return (
        s[keep],
        [members[i] for i in keep],
        [ids[i] for i in keep],
        [texts[i] for i in keep],
        None if users is None else [users[i] for i in keep],
        info,
    )


def _score_split_check(texts, s, members, ids, seed, aggregate_only, p, users=None):
    """The split check of a scores file with a ``text`` column: near-duplicate
    member/non-member rows are dropped, the blind scores come back in row order, with the
    kept rows' positions. ``users``: the check's units (stats/split_check.py)."""
    from privacy_audit.stats.split_check import SplitCheck

    m = np.asarray(members)
    mi, ni = np.flatnonzero(m == 1), np.flatnonzero(m == 0)
    try:
        check, blind = SplitCheck(seed=seed, aggregate_only=aggregate_only).run(
            [texts[i] for i in mi],
            [texts[i] for i in ni],
            users=None if users is None else [users[i] for i in np.r_[mi, ni]],
        )
    except ValueError as exc:
        raise DataError(f"scores file {str(p)!r}: {exc}") from None
    d = check["duplicates"]
    kept = np.ones(len(s), dtype=bool)
    kept[mi[np.asarray(d.pop("member_index"), dtype=np.int64)]] = False
    kept[ni[np.asarray(d.pop("nonmember_index"), dtype=np.int64)]] = False
    keep = np.flatnonzero(kept)
    if blind is None:
        raise DataError(
            f"scores file {str(p)!r}: after removing {d['pairs']} near-duplicate member/"
            "non-member pair(s) fewer than 2 members or non-members are left"
        )
    # blind scores are of the kept members, then the kept non-members: back to row order
    # (array indexing, not a dict per row: 10^6 rows)
    by_row = np.empty(len(s))
    by_row[np.r_[mi[kept[mi]], ni[kept[ni]]]] = blind
    rows = keep.tolist()
    return (
        s[keep],
        [members[i] for i in rows],
        [ids[i] for i in rows],
        (check, by_row[keep]),
        rows,
    )


def _score_users(cells, members, column: str, p: Path) -> list[str]:
    """Each row's user from the ``--group-by`` column, as ``run --group-by`` reads one (a
    number by value: ``7`` and ``7.0`` are one user); an empty cell, a user on both sides
    or fewer than 4 users a side is refused."""
    from privacy_audit.audit.data import check_user_counts, group_value

    users = [
        group_value(c, column, f"scores file {str(p)!r} data row {i + 1}")
        for i, c in enumerate(cells)
    ]
    side_in = {u for u, m in zip(users, members, strict=True) if m == 1}
    side_out = {u for u, m in zip(users, members, strict=True) if m == 0}
    both = sorted(side_in & side_out)
    if both:
        raise DataError(
            f"scores file {str(p)!r}: {len(both)} user(s) of group column {column!r} have rows "
            f"with member 1 and member 0 (first: {both[0]!r}); a user is a member or not, so "
            "give each user's rows one member value"
        )
    check_user_counts(len(side_in), len(side_out), column, f"scores file {str(p)!r}: ")
    return users


def _users_kept(users: list[str], keep, column: str, p: Path) -> list[str]:
    """The users of the kept rows; refused when dropping rows left a user with none (that
    user would silently leave every user-level statistic)."""
    from privacy_audit.audit.data import check_users_kept

    kept = [users[i] for i in keep]
    check_users_kept((set(users), set()), (set(kept), set()), column, f"in scores file {str(p)!r}")
    return kept


__all__ = ["run_audit", "score_file"]
