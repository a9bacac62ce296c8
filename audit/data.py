"""Audit data: members (training set), non-members (held out) and a utility test set.

Sources:
- the bundled fixture corpus (``data.corpus = "fixtures"``): its private split is shuffled
  with the seed and cut into disjoint members / non-members / test sets;
- a user corpus file (see :func:`read_table` for the formats), split the same way;
- explicit ``data.members`` / ``data.nonmembers`` (/ ``data.test``) files or saved datasets.

Causal LMs need no label column (``labels=False``): every example gets one label.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.defenses.base import Examples
from privacy_audit.ground.errors import DataError

# Universal newlines only: str.splitlines() also splits on \x0b, \x0c, \x1c-\x1e, \x85,
# \u2028 and \u2029, which json.dumps(ensure_ascii=False) and CSV fields keep verbatim.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _utf8_text(value: str, where: str) -> str:
    """Reject strings with unpaired surrogates (JSON escapes like "\\ud800"): they cannot
    be tokenized or written to the UTF-8 report and results.json."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(f"{where} holds an unpaired surrogate escape (not valid Unicode)") from None
    return value


DATA_FORMATS = (".txt", ".jsonl", ".json", ".ndjson", ".csv", ".parquet")
#: The label every row gets when the model needs none (causal LMs score text only).
NO_LABEL = "-"


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def label_key(label: Any) -> str:
    """A label as text, compared by value: ``1``, ``1.0``, ``"1"`` and ``"1.0"`` are all
    ``"1"`` (a JSON integer, a float column and a CSV string name the same class);
    ``1.5`` is ``"1.5"``; anything not a number is its plain text."""
    if isinstance(label, bool):
        return str(label)
    if isinstance(label, int):
        return str(label)
    if isinstance(label, float):
        return str(int(label)) if label.is_integer() else repr(label)
    text = str(label)
    if _NUMBER.fullmatch(text.strip()):
        try:
            x = float(text)
        except (ValueError, OverflowError):  # pragma: no cover - the pattern is a float
            return text
        if math.isfinite(x):
            if x.is_integer() and abs(x) < 2**53:
                return str(int(x))
            return repr(x)
    return text


def check_input_file(path: str | Path, what: str = "data file", dirs: bool = True) -> None:
    """An input path must exist and be a regular file (or, with ``dirs``, a directory):
    ``/dev/null``, a FIFO (reading it would block until a writer comes) or a socket is
    named for what it is, with ``what`` (the flag or config key the user typed)."""
    import stat as st_

    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{what} {str(p)!r} does not exist") from None
    except OSError as exc:
        raise DataError(f"{what} {str(p)!r} cannot be read: {exc.strerror or exc}") from None
    if st_.S_ISREG(mode) or (dirs and st_.S_ISDIR(mode)):
        return
    kind = (
        "a FIFO (named pipe)"
        if st_.S_ISFIFO(mode)
        else "a character device"
        if st_.S_ISCHR(mode)
        else "a block device"
        if st_.S_ISBLK(mode)
        else "a socket"
        if st_.S_ISSOCK(mode)
        else "a directory"
        if st_.S_ISDIR(mode)
        else "not a regular file"
    )
    raise DataError(
        f"{what} {str(p)!r} is {kind}, not a regular file; give a file of texts"
        + (" or a saved dataset directory" if dirs else "")
    )


def _raise_field_limit(text: str) -> None:
    csv.field_size_limit(min(max(len(text) + 1, 131072), 2**31 - 1))


def csv_reader(text: str):
    """A ``csv.reader`` over ``text`` that reads fields of any length (see :func:`csv_rows`)."""
    _raise_field_limit(text)
    return csv.reader(io.StringIO(text, newline=""))


def csv_rows(text: str) -> csv.DictReader:
    """A ``csv.DictReader`` over ``text`` that reads fields of any length: the csv module's
    default cap (131072 characters) refused valid files with long texts, which are cut to
    ``max_length`` later like every other text (audit/textcap.py)."""
    _raise_field_limit(text)
    return csv.DictReader(io.StringIO(text, newline=""))


def _read_text(p: Path) -> str:
    try:
        # bytes, not read_text(): no newline translation, so a quoted CSV field keeps its \r
        return p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"data file {str(p)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise DataError(f"data file {str(p)!r} cannot be read: {exc.strerror or exc}") from None


def _jsonl_records(p: Path, content: str) -> list[tuple[int, dict]]:
    records = []
    for lineno, line in enumerate(_LINE_BREAK.split(content), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"data file {str(p)!r} line {lineno} is not valid JSON: {exc.msg}"
            ) from None
        except ValueError:  # an integer past Python's int-from-string digit limit
            raise DataError(
                f"data file {str(p)!r} line {lineno} is not valid JSON: number too long"
            ) from None
        except RecursionError:
            raise DataError(
                f"data file {str(p)!r} line {lineno} is not valid JSON: nested too deeply"
            ) from None
        if not isinstance(obj, dict):
            raise DataError(f"data file {str(p)!r} line {lineno} is not a JSON object")
        records.append((len(records), obj))
    return records


def _parquet_records(p: Path) -> list[tuple[int, dict]]:
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(p)
    except ImportError:  # pragma: no cover - pyarrow comes with datasets
        raise DataError(
            f"reading {str(p)!r} needs pyarrow (pip install 'privacy-audit[hf]')"
        ) from None
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a bad file
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"data file {str(p)!r} is not a readable parquet file: {first}") from None
    return list(enumerate(table.to_pylist()))


def _dataset_records(p: Path) -> list[tuple[int, dict]]:
    """Rows of a directory written by ``datasets.Dataset.save_to_disk``."""
    if not (p / "dataset_info.json").is_file() and not (p / "dataset_dict.json").is_file():
        raise DataError(
            f"data path {str(p)!r} is a directory but not one saved by "
            "datasets.Dataset.save_to_disk (no dataset_info.json); give a file "
            f"({', '.join(DATA_FORMATS)}) or a saved dataset"
        )
    try:
        import datasets

        ds = datasets.load_from_disk(str(p))
    except ImportError:  # pragma: no cover
        raise DataError(
            f"reading {str(p)!r} needs the 'datasets' package (pip install 'privacy-audit[hf]')"
        ) from None
    except Exception as exc:  # noqa: BLE001 - datasets/pyarrow raise many types
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"saved dataset {str(p)!r} cannot be read: {first}") from None
    if isinstance(ds, datasets.DatasetDict):
        raise DataError(
            f"saved dataset {str(p)!r} holds several splits ({', '.join(ds)}); give one "
            "split's directory"
        )
    return list(enumerate(ds.to_list()))


def _file_records(
    p: Path, text_column: str, label_column: str | None, label_required: bool
) -> tuple[list[tuple[int, dict]], str]:
    """The (position, record) pairs of a data file or a saved dataset directory, by its
    format, and the file's suffix (``""`` for a directory). A plain text file has no label
    column: refused when a label is required."""
    if p.is_dir():
        return _dataset_records(p), ""
    if not p.is_file():
        check_input_file(p)
        raise DataError(f"data file {str(p)!r} cannot be read")
    suffix = p.suffix.lower()
    records = []
    if suffix == ".txt":
        if label_column is not None and label_required:
            raise DataError(
                f"data file {str(p)!r} is plain text (one example per line) and has no "
                f"label column {label_column!r}; a classifier needs .jsonl, .csv or .parquet"
            )
        content = _read_text(p)
        for lineno, line in enumerate(_LINE_BREAK.split(content), start=1):
            if line.strip():
                records.append((lineno, {text_column: line}))
    elif suffix in (".jsonl", ".json", ".ndjson"):
        records = _jsonl_records(p, _read_text(p))
    elif suffix == ".csv":
        reader = csv_rows(_read_text(p))
        try:
            if reader.fieldnames is None:
                raise DataError(f"data file {str(p)!r} is empty")
            records = list(enumerate(reader))
        except csv.Error as exc:  # e.g. a field over the csv module's 128 KiB limit
            raise DataError(
                f"data file {str(p)!r} is not valid CSV (line {reader.line_num}): {exc}"
            ) from None
    elif suffix == ".parquet":
        records = _parquet_records(p)
    else:
        raise DataError(
            f"data file {str(p)!r} must end in {', '.join(DATA_FORMATS)} or be a directory "
            "saved by datasets.Dataset.save_to_disk"
        )
    return records, suffix


def read_table(
    path: str | Path,
    text_column: str,
    label_column: str | None,
    id_column: str | None,
    label_required: bool = True,
    id_prefix: str | None = None,
    require_text: bool = False,
    group_column: str | None = None,
) -> list[dict]:
    """Rows of a data file as dicts with keys ``id``, ``text``, ``label``.

        Formats: ``.txt`` (one example per line, blank lines ignored), ``.jsonl`` (also
        ``.json`` / ``.ndjson``: one JSON object per line), ``.csv``, ``.parquet``, and a
        directory written by ``datasets.Dataset.save_to_disk``. ``label_column=None``: no
        label is read (causal LMs), every row gets :data:`NO_LABEL`; with
        ``label_required=False`` a row without the label column gets it too. Ids come from
        ``id_column`` when the row has one, else they are stable: ``<file stem>:<line>`` for
        ``.txt`` (1-based line number), ``<file stem>-<row>`` otherwise (0-based row);
        ``id_prefix`` replaces the file stem there (two files with one name in different
        folders). Labels are compared by value (:func:`label_key`). ``require_text``: a file whose
    ``text_column`` is empty in every row is refused (an audit's data).

    ``group_column``: each row's user (person) is read from that column into ``group``; a
    row without it, or with an empty value, is refused. A directory of ``.txt`` files (no
    ``dataset_info.json``) is one file per user: the file's name without ``.txt`` is the
    user, each non-blank line one text, and every row gets ``group`` whatever
    ``group_column`` says."""
    p = Path(path)
    if p.is_dir() and _per_user_dir(p):
        if label_column is not None and label_required:
            raise DataError(
                f"data directory {str(p)!r} holds plain text (one .txt file per user) and has "
                f"no label column {label_column!r}; a classifier needs .jsonl, .csv or .parquet"
            )
        return _per_user_rows(p, text_column, id_prefix)
    records, suffix = _file_records(p, text_column, label_column, label_required)
    if not records:
        raise DataError(f"data file {str(p)!r} has no rows")
    texts = [rec.get(text_column) for _, rec in records]
    if (
        require_text  # an audit's file: texts of nothing are no data (the file reads as is)
        and text_column in records[0][1]
        and all(isinstance(t, str) and not t.strip() for t in texts)
    ):
        raise DataError(
            f"data file {str(p)!r}: column {text_column!r} is empty in all {len(texts)} rows; "
            "there is no text to audit"
        )
    sep = ":" if suffix == ".txt" else "-"
    rows = []
    needed = (
        (text_column,)
        if label_column is None or not label_required
        else (text_column, label_column)
    ) + ((group_column,) if group_column else ())
    for i, (pos, rec) in enumerate(records):
        for col in needed:
            if col not in rec:
                have = ", ".join(sorted(map(str, rec))[:10])
                what = "group (user) column" if col == group_column else "column"
                raise DataError(
                    f"data file {str(p)!r} has no {what} {col!r} (row {i + 1}); its columns: {have}"
                )
        text = rec[text_column]
        where = f"data file {str(p)!r} row {i + 1}"
        if not isinstance(text, str):
            raise DataError(f"{where}: column {text_column!r} must be text")
        if label_column is None or (not label_required and label_column not in rec):
            label = NO_LABEL
        else:
            label = rec[label_column]
            if (
                label is None
                or label == ""
                or (isinstance(label, float) and not math.isfinite(label))
            ):
                raise DataError(f"{where}: column {label_column!r} is empty")
        rid = rec.get(id_column) if id_column else None
        row = {
            "id": _utf8_text(str(rid), where)
            if rid not in (None, "")
            else f"{id_prefix or p.stem}{sep}{pos}",
            "text": _utf8_text(text, where),
            "label": _utf8_text(label_key(label), where),
        }
        if group_column:
            row["group"] = group_value(rec[group_column], group_column, where)
        rows.append(row)
    return rows


def group_value(value: Any, column: str, where: str) -> str:
    """A user id as text: a number by value (``7`` and ``7.0`` are one user, as labels
    are); empty, NaN or a container is refused."""
    if (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise DataError(f"{where}: group (user) column {column!r} is empty")
    if isinstance(value, (dict, list)):
        raise DataError(f"{where}: group (user) column {column!r} must be a name or a number")
    return _utf8_text(label_key(value), where)


def _per_user_dir(p: Path) -> bool:
    """A directory of ``.txt`` files, one per user (not a saved dataset)."""
    if (p / "dataset_info.json").is_file() or (p / "dataset_dict.json").is_file():
        return False
    return any(q.suffix.lower() == ".txt" and q.is_file() for q in p.iterdir())


def _per_user_rows(p: Path, text_column: str, id_prefix: str | None) -> list[dict]:
    """Rows of a directory with one ``.txt`` file per user (one text per non-blank line)."""
    others = sorted(q.name for q in p.iterdir() if q.suffix.lower() != ".txt" and q.is_file())
    if others:
        raise DataError(
            f"data directory {str(p)!r} holds one .txt file per user, but also {others[0]!r}; "
            "keep only the users' .txt files there"
        )
    rows = []
    for q in sorted(p.iterdir()):
        if q.suffix.lower() != ".txt":
            continue
        user = q.stem
        where = f"data file {str(q)!r}"
        before = len(rows)
        for lineno, line in enumerate(_LINE_BREAK.split(_read_text(q)), start=1):
            if line.strip():
                rows.append(
                    {
                        "id": f"{id_prefix or p.name}/{user}:{lineno}",
                        "text": _utf8_text(line, where),
                        "label": NO_LABEL,
                        "group": _utf8_text(user, where),
                    }
                )
        if len(rows) == before:  # a user with no text would silently vanish
            raise DataError(
                f"{where} holds no text: user {user!r} has no text; remove the file or give "
                "that user's texts"
            )
    if not rows:
        raise DataError(f"data directory {str(p)!r}: every user's .txt file is empty")
    return rows


@dataclass
class AuditData:
    members: Examples
    nonmembers: Examples
    test: Examples
    label_names: list[str]
    public: Examples | None = None
    #: exact member/non-member duplicates removed at loading (:func:`drop_cross_duplicates`)
    exact_duplicates: dict[str, Any] | None = None
    #: texts of the member and non-member users that were never trained on (user
    #: inference from fresh texts; ``members`` marks the user's side), or None
    fresh: Examples | None = None
    #: the column (or "file" for one .txt file per user) that names each text's user
    group_column: str | None = None

    def attack_set(self) -> Examples:
        """Members then non-members, with membership labels (1 = member)."""
        n_in, n_out = len(self.members), len(self.nonmembers)
        return Examples(
            ids=self.members.ids + self.nonmembers.ids,
            texts=self.members.texts + self.nonmembers.texts,
            labels=np.concatenate([self.members.labels, self.nonmembers.labels]),
            members=np.concatenate([np.ones(n_in, np.int64), np.zeros(n_out, np.int64)]),
            attributes=self.members.attributes + self.nonmembers.attributes
            if self.members.attributes is not None and self.nonmembers.attributes is not None
            else None,
            groups=self.members.groups + self.nonmembers.groups
            if self.members.groups is not None and self.nonmembers.groups is not None
            else None,
        )


def to_examples(rows: list[dict], label_index: dict[str, int]) -> Examples:
    """Rows as Examples; the sensitive ``attribute`` is kept when every row has one."""
    has_attr = bool(rows) and all("attribute" in r for r in rows)
    has_group = bool(rows) and all("group" in r for r in rows)
    return Examples(
        ids=[r["id"] for r in rows],
        texts=[r["text"] for r in rows],
        labels=np.array([label_index[r["label"]] for r in rows], dtype=np.int64),
        attributes=[r["attribute"] for r in rows] if has_attr else None,
        groups=[r["group"] for r in rows] if has_group else None,
    )


def _dup_key(text: str) -> str:
    return text.strip()


def cross_duplicates(members: list[str], nonmembers: list[str]) -> list[int]:
    """Indices of the non-member texts that also occur among the members (exactly, up to
    surrounding whitespace). An empty text (a blank ``text`` cell of a scores file) is no
    text: it duplicates nothing."""
    seen = {_dup_key(t) for t in members if t and t.strip()}
    return [i for i, t in enumerate(nonmembers) if t and t.strip() and _dup_key(t) in seen]


def _label_summary(labels: set[str]) -> str:
    shown = sorted(labels)[:5]
    more = f" and {len(labels) - 5} more" if len(labels) > 5 else ""
    return "{" + ", ".join(repr(x) for x in shown) + more + "}"


def _drop_duplicate_rows(
    members: list[dict], nonmembers: list[dict], where: str
) -> tuple[list[dict], dict[str, Any]]:
    """The non-member rows without exact copies of a member text, and the count record.

    A non-member whose text the model was trained on (as a member) is not a non-member:
    kept, it pulls the AUC towards 0.5 and, with every non-member duplicated, reads as
    LOW leakage. The non-member copy goes; the members (the training set) stay as they are.
    """
    drop = set(cross_duplicates([r["text"] for r in members], [r["text"] for r in nonmembers]))
    record = {
        "removed_nonmembers": len(drop),
        "distinct_texts": len({_dup_key(nonmembers[i]["text"]) for i in drop}),
        "nonmembers_before": len(nonmembers),
        "where": where,
    }
    if drop and len(drop) == len(nonmembers):
        raise DataError(
            f"every one of the {len(nonmembers)} non-member texts is also a member text "
            "(exact duplicates): the two sets are the same data and no membership can be "
            "measured; give held-out texts the model never saw as non-members"
        )
    kept = [r for i, r in enumerate(nonmembers) if i not in drop]
    return kept, record


def drop_cross_duplicates(data: AuditData, where: str = "after cutting to max_length") -> AuditData:
    """``data`` without non-members whose text equals a member text (the counts are added
    to ``data.exact_duplicates``); the same object when there are none."""
    m, n = data.members, data.nonmembers
    drop = set(cross_duplicates(m.texts, n.texts))
    if not drop:
        return data
    if len(drop) == len(n):
        raise DataError(
            f"every one of the {len(n)} non-member texts equals a member text {where} "
            "(exact duplicates): no membership can be measured"
        )
    from dataclasses import replace

    kept = n.subset([i for i in range(len(n)) if i not in drop])
    record = dict(data.exact_duplicates or {"removed_nonmembers": 0, "nonmembers_before": len(n)})
    record["removed_nonmembers"] = int(record.get("removed_nonmembers", 0)) + len(drop)
    record[f"removed_{where.replace(' ', '_')}"] = len(drop)
    return replace(with_sets(data, data.members, kept), exact_duplicates=record)


def with_sets(data: AuditData, members: Examples, nonmembers: Examples) -> AuditData:
    """``data`` with new member / non-member sets and every other field kept (the record
    of removed duplicates included). A test set that is the non-members (the default when
    none is given: the same object, or a copy with the same ids) follows them, so a text
    removed from the non-members never comes back as a population or test text."""
    from dataclasses import replace

    same = data.test is data.nonmembers or list(data.test.ids) == list(data.nonmembers.ids)
    return replace(
        data, members=members, nonmembers=nonmembers, test=nonmembers if same else data.test
    )


def log_duplicates(data: AuditData, progress: bool) -> None:
    """One progress line when exact member/non-member duplicates were removed."""
    import sys

    rec = data.exact_duplicates or {}
    n = int(rec.get("removed_nonmembers", 0))
    if n and progress:
        print(
            f"  removed {n} non-member text(s) that are exact copies of member texts "
            f"({len(data.nonmembers)} non-members remain)",
            file=sys.stderr,
            flush=True,
        )


def _check_labels(members: list[dict], nonmembers: list[dict]) -> None:
    """Refuse label sets that share nothing: a classifier audited on non-members whose
    labels never occur among the members sees two populations, not members and
    non-members (e.g. ``1`` vs ``1.0`` before labels compared by value, or
    ``label_column`` naming the text)."""
    have = {r["label"] for r in members}
    other = {r["label"] for r in nonmembers}
    if not have & other:
        raise DataError(
            "no non-member label occurs among the members: members have labels "
            f"{_label_summary(have)}, non-members {_label_summary(other)}; check "
            "label_column and that both files label the same classes"
        )


def _check_sets(
    members: list[dict], nonmembers: list[dict], train: bool, sources: tuple[str, str] | None = None
) -> None:
    if not members or not nonmembers:
        raise DataError(
            f"need both members and non-members, got {len(members)} members and {len(nonmembers)} non-members"
        )
    if train and len({r["label"] for r in members}) < 2:
        raise DataError(
            "the member set has a single task label; a classifier needs at least two classes"
        )
    ids = [r["id"] for r in members + nonmembers]
    if len(set(ids)) != len(ids):
        from collections import Counter

        dup = next(i for i, c in Counter(ids).items() if c > 1)
        in_m = sum(1 for r in members if r["id"] == dup)
        if sources is not None and in_m == 1:
            raise DataError(
                f"example ids are not unique: {dup!r} occurs in both the members file "
                f"{sources[0]!r} and the non-members file {sources[1]!r}"
            )
        where = (
            f" (members {sources[0]!r}, non-members {sources[1]!r})" if sources is not None else ""
        )
        raise DataError(f"example ids are not unique: {dup!r} occurs twice{where}")


def _id_prefixes(a: str | Path, b: str | Path) -> tuple[str | None, str | None]:
    """Id prefixes for two data files with the same name in different folders: the
    shortest trailing paths that tell them apart (``members/a`` vs ``held-out/a``)."""
    pa, pb = Path(a).resolve(), Path(b).resolve()
    if pa == pb or pa.stem != pb.stem:
        return None, None
    ra, rb = pa.with_suffix("").parts, pb.with_suffix("").parts
    for k in range(2, max(len(ra), len(rb)) + 1):
        ta, tb = "/".join(ra[-k:]), "/".join(rb[-k:])
        if ta != tb:
            return ta, tb
    return None, None


def load_audit_data(
    data_cfg: dict[str, Any],
    seed: int,
    train: bool,
    label_names: list[str] | None = None,
    labels: bool | str = True,
    user_counts: bool = True,
) -> AuditData:
    """Build members / non-members / test per the ``[data]`` config section.
    ``labels=False`` (a causal LM audited as it is): no label column is read; every
    example has one label. ``labels="optional"`` (a causal LM the suite trains): labels
    are read where the data has them (the fixture corpus), else every example gets one."""
    cols = (
        data_cfg["text_column"],
        data_cfg["label_column"] if labels else None,
        data_cfg["id_column"],
    )
    import functools

    group = data_cfg.get("group")
    if labels == "optional":
        read = functools.partial(
            read_table, label_required=False, require_text=True, group_column=group
        )
        train = False  # one label is fine for a causal LM
    else:
        read = functools.partial(read_table, require_text=True, group_column=group)
    if not labels:
        label_names = [NO_LABEL]
        train = False  # the single-label check is for classifiers
    sources = None
    if data_cfg["members"] is not None:
        sources = (str(data_cfg["members"]), str(data_cfg["nonmembers"]))
        pre_m, pre_n = _id_prefixes(*sources)
        members = read(data_cfg["members"], *cols, id_prefix=pre_m)
        nonmembers = read(data_cfg["nonmembers"], *cols, id_prefix=pre_n)
        test = read(data_cfg["test"], *cols) if data_cfg["test"] else nonmembers
    else:
        members, nonmembers, test = _split_corpus(data_cfg, read, cols, seed)
    same_test = test is nonmembers  # the default test set: the non-members
    public: list[dict] | None = None
    if data_cfg["public"] is not None and data_cfg["public"] != "fixtures":
        public = read(data_cfg["public"], *cols)
    elif data_cfg["public"] == "fixtures" or (
        data_cfg["corpus"] == "fixtures" and data_cfg["members"] is None
    ):
        public = _fixture_rows("public")
    if not labels:  # fixture rows carry task labels; a causal LM ignores them
        members, nonmembers, test = (
            [{**r, "label": NO_LABEL} for r in rows] for rows in (members, nonmembers, test)
        )
        public = [{**r, "label": NO_LABEL} for r in public] if public else public
    users_before = None
    if _grouped(members, nonmembers, group):
        group = group or "file"
        _check_user_sides(members, nonmembers, group)
        users_before = _users_of(members, nonmembers)
    nonmembers, duplicates = _drop_duplicate_rows(members, nonmembers, "at loading")
    if users_before is not None:
        check_users_kept(users_before, _users_of(members, nonmembers), group, "at loading")
        if user_counts:  # dataset inference checks its own (per fit split) instead
            check_user_counts(*map(len, users_before), group, "")
    if same_test:
        test = nonmembers
    _check_sets(members, nonmembers, train, sources)
    if labels is True:  # a classifier: its task labels must describe the same classes
        _check_labels(members, nonmembers)
    label_names, index = _label_index(label_names, members + nonmembers + test, public)
    fresh = None
    if data_cfg.get("fresh") is not None:
        fresh = _fresh_rows(read, data_cfg["fresh"], cols, members, nonmembers, group)
    return AuditData(
        to_examples(members, index),
        to_examples(nonmembers, index),
        to_examples(test, index),
        label_names,
        to_examples(public, index) if public else None,
        duplicates,
        _fresh_examples(fresh, index) if fresh else None,
        group if users_before is not None else None,
    )


def _fixture_rows(split: str) -> list[dict]:
    """The bundled corpus's ``private`` or ``public`` rows, with their attribute."""
    from privacy_audit import fixtures

    return [
        {
            "id": r["id"],
            "text": r["text"],
            "label": str(r["label"]),
            "attribute": str(r["attribute"]),
        }
        for r in fixtures.load_corpus(split)
    ]


def _split_corpus(data_cfg: dict[str, Any], read, cols, seed: int):
    """Members, non-members and test drawn from ``data.corpus`` (the bundled one:
    ``fixtures``) by a permutation at ``seed``."""
    if data_cfg["corpus"] == "fixtures":
        pool = _fixture_rows("private")
    else:
        pool = read(data_cfg["corpus"], *cols)
    n_in, n_out, n_test = data_cfg["n_members"], data_cfg["n_nonmembers"], data_cfg["n_test"]
    if n_in + n_out + n_test > len(pool):
        raise DataError(
            f"corpus has {len(pool)} rows but n_members + n_nonmembers + n_test = {n_in + n_out + n_test}"
        )
    order = np.random.default_rng(seed).permutation(len(pool))
    members = [pool[i] for i in order[:n_in]]
    nonmembers = [pool[i] for i in order[n_in : n_in + n_out]]
    test = [pool[i] for i in order[n_in + n_out : n_in + n_out + n_test]]
    return members, nonmembers, test


def _label_index(
    label_names: list[str] | None, rows: list[dict], public: list[dict] | None
) -> tuple[list[str], dict[str, int]]:
    """The label names (by default those of ``rows``) and each one's index; a label of
    ``rows`` or ``public`` that is not one of them is refused."""
    if label_names is None:
        label_names = sorted({r["label"] for r in rows})
    index = {name: i for i, name in enumerate(label_names)}
    unknown = sorted({r["label"] for r in rows + (public or [])} - set(index))
    if unknown:
        raise DataError(
            f"label {unknown[0]!r} in the data is not one of the model's labels: {', '.join(label_names)}"
        )
    return label_names, index


def _grouped(members: list[dict], nonmembers: list[dict], column: str | None) -> bool:
    """Whether the data names users; refuses one side with users and one without."""
    has = ["group" in r for r in members[:1] + nonmembers[:1]]
    if column is None and any(has) and not all(has):
        side = "members" if has[0] else "non-members"
        raise DataError(
            f"only the {side} are one .txt file per user; give the other side the same way "
            "(a directory of per-user .txt files) or set [data] group"
        )
    return column is not None or all(has)


def _users_of(members: list[dict], nonmembers: list[dict]) -> tuple[set[str], set[str]]:
    return {r["group"] for r in members}, {r["group"] for r in nonmembers}


def _check_user_sides(members: list[dict], nonmembers: list[dict], column: str) -> None:
    """Every user on one side: a member user is one whose texts were trained on."""
    both = sorted(_users_of(members, nonmembers)[0] & _users_of(members, nonmembers)[1])
    if both:
        raise DataError(
            f"{len(both)} user(s) of group column {column!r} have texts on both the member "
            f"and the non-member side (first: {both[0]!r}); a user is a member or not, so "
            "give each user's texts on one side only"
        )


#: Users a side that the user-level intervals need: the split-half balanced accuracy
#: puts two users a side in each half (stats/by_user.py ``grouped_text_metrics``).
MIN_USERS_PER_SIDE = 4


def check_user_counts(n_members: int, n_nonmembers: int, column: str, where: str) -> None:
    """Refuse fewer than :data:`MIN_USERS_PER_SIDE` member or non-member users (found
    after the training, the user-level statistics would fail with nothing to say)."""
    if n_members < MIN_USERS_PER_SIDE or n_nonmembers < MIN_USERS_PER_SIDE:
        raise DataError(
            f"{where}group column {column!r} names {n_members} member and {n_nonmembers} "
            f"non-member user(s); user-level statistics need at least {MIN_USERS_PER_SIDE} "
            "users on each side"
        )


def check_users_kept(
    before: tuple[set[str], set[str]], after: tuple[set[str], set[str]], column: str, where: str
) -> None:
    """Refuse a cleaning step that left a user with no text: that user would silently
    drop out of every user-level statistic."""
    lost = sorted((before[0] - after[0]) | (before[1] - after[1]))
    if lost:
        raise DataError(
            f"{len(lost)} user(s) of group column {column!r} have no text left {where} "
            f"(first: {lost[0]!r}; their texts were duplicates of the other side's or not "
            "scorable); remove those users or give them other texts"
        )


def _fresh_rows(read, path, cols, members, nonmembers, column) -> list[dict]:
    """The fresh-texts file: each row a text of a member or non-member user that the model
    was never trained on; ``member`` marks the user's side. Rows of users on neither side
    are refused (a misspelt user would be silently untested)."""
    if column is None:
        raise DataError(
            "[data] fresh (user inference from fresh texts) needs users: set [data] group "
            "(--group-by COLUMN) or give one .txt file per user"
        )
    rows = read(path, *cols, id_prefix="fresh", group_column=None if column == "file" else column)
    if any("group" not in r for r in rows):
        raise DataError(
            f"the fresh-texts file {str(path)!r} names no users; give it as the other sides "
            "are given (one .txt file per user)"
        )
    side_in, side_out = _users_of(members, nonmembers)
    unknown = sorted({r["group"] for r in rows} - side_in - side_out)
    if unknown:
        raise DataError(
            f"{len(unknown)} user(s) of group column {column!r} in the fresh-texts file "
            f"{str(path)!r} are neither member nor non-member users (first: {unknown[0]!r})"
        )
    trained = {_dup_key(r["text"]) for r in members}
    copies = sum(_dup_key(r["text"]) in trained for r in rows)
    if copies:
        raise DataError(
            f"{copies} text(s) of the fresh-texts file {str(path)!r} are copies of member "
            "(training) texts; fresh texts must be texts the model never saw"
        )
    return [{**r, "member": int(r["group"] in side_in)} for r in rows]


def _fresh_examples(rows: list[dict], index: dict[str, int]) -> Examples:
    unknown = sorted({r["label"] for r in rows} - set(index))
    if unknown:
        raise DataError(
            f"label {unknown[0]!r} of the fresh-texts file is not one of the model's labels"
        )
    ex = to_examples(rows, index)
    ex.members = np.array([r["member"] for r in rows], dtype=np.int64)
    return ex


def distinct_records(
    texts: list[str], users: list[str] | None = None
) -> tuple[list[int], dict[str, Any]]:
    """The first text of each group of exact or near-duplicates (the split check's
    criterion: equal normalised texts, or 5-gram Jaccard ≥ 0.8, chained) and the counts.

    Copies of one record are one record: counted as many, they would narrow every interval
    and raise every bound as if each copy were a person's independent text. With ``users``
    (one per text) only copies within one user collapse: two people who wrote the same
    text are two users, each keeping their record (the user, not the text, is the unit)."""
    from privacy_audit.stats.near_duplicates import duplicate_groups

    if not texts:
        return [], {"texts": 0, "distinct": 0, "removed": 0, "groups_with_copies": 0, "largest": 0}
    groups = duplicate_groups(list(texts))
    if users is not None:
        _, user_ids = np.unique(np.asarray(users, dtype=object).astype(str), return_inverse=True)
        _, groups = np.unique(np.stack([np.asarray(groups), user_ids]), axis=1, return_inverse=True)
        groups = groups.ravel()
    # a blank text duplicates nothing (as in the cross-set join): each is its own record
    blank = [i for i, t in enumerate(texts) if not str(t).strip()]
    if blank:
        groups = groups.copy()
        groups[blank] = groups.max() + 1 + np.arange(len(blank))
        _, groups = np.unique(groups, return_inverse=True)
    first: dict[int, int] = {}
    for i, g in enumerate(groups.tolist()):
        first.setdefault(g, i)
    sizes = np.bincount(groups)
    keep = sorted(first.values())
    return keep, {
        "texts": len(texts),
        "distinct": len(keep),
        "removed": len(texts) - len(keep),
        "groups_with_copies": int((sizes > 1).sum()),
        "largest": int(sizes.max()),
    }
