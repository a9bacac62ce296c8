"""Fuzzing the input boundary: TOML configs, JSONL/CSV data tables and score files.

Whatever a user hands the suite, a loader either returns a value or raises an
``AuditError``; the CLI then exits 0 or 2 with exactly one ``privacy-audit: error:`` line
and no partial report, never 3 (internal error) with a traceback.

Hypothesis runs derandomized (a fixed seed per test) and without an example database, so
CI sees the same examples on every run. Nothing here trains a model: ``run`` is invoked
only for configs that ``load_config`` rejected, so it stops before any work.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from privacy_audit.attacks import ATTACKS
from privacy_audit.audit.config import AuditConfig, load_config
from privacy_audit.audit.config_schema import DEVICES, SCHEMA, TOP_SECTIONS, TRAIN_OVERRIDES
from privacy_audit.audit.data import read_table
from privacy_audit.audit.epsilon.input_canaries import CANARY_KINDS
from privacy_audit.audit.runner import score_file
from privacy_audit.defenses import DEFENSES
from privacy_audit.defenses.base import NOTIONS, UNITS
from privacy_audit.defenses.dp_sgd import DPSGD
from privacy_audit.ground.errors import AuditError, ConfigError, DataError
from privacy_audit.ground.io import dumps_json
from privacy_audit.targets.loading import PRESETS

FUZZ = settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def rarely(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws (a middle value: Hypothesis favours the bounds of a
    range, and shrinks towards False, i.e. towards the well-formed case)."""
    return st.integers(0, n - 1).map(lambda i: i == n // 2)


@contextlib.contextmanager
def _workdir():
    """A fresh directory per example (pytest's tmp_path is per test, not per example)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as d:
        yield Path(d)


def assert_one_line_input_error(outcome, out_dir: Path) -> None:
    """Exit 2, one ``privacy-audit: error:`` line on stderr, no traceback, no outputs."""
    assert outcome.code == 2, (outcome.code, outcome.stderr)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {outcome.stderr!r}"
    assert lines[0].startswith("privacy-audit: error: "), lines[0]
    assert "Traceback" not in outcome.stderr + outcome.stdout
    assert outcome.stdout == ""
    assert not (out_dir / "report.html").exists()
    assert not (out_dir / "results.json").exists()
    assert not out_dir.exists() or not any(out_dir.iterdir()), list(out_dir.iterdir())


# --------------------------------------------------------------------------- #
# byte-level mutations shared by every loader
# --------------------------------------------------------------------------- #
#: Fragments that have broken parsers before: non-finite and huge numbers, deep nesting,
#: escapes of unpaired surrogates, BOMs, NUL, Unicode line separators, stray quotes.
NASTY_FRAGMENTS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1" * 5000,  # past Python's int-from-string digit limit
    "0x" + "f" * 5000,  # a huge hex integer: no digit limit for power-of-two bases
    "[" * 5000,
    "{" * 5000,
    '"\\ud800"',
    "\\ud800",
    "\ufeff",
    "\x00",
    "\u2028",
    "\x85",
    "\x1c",
    "\r",
    '"',
    '""',
    ",",
    "\n",
    "x" * 140_000,  # longer than the csv module's default field limit
]


@st.composite
def mutated(draw, base: bytes) -> bytes:
    """``base`` truncated at a random byte, with random bytes or nasty fragments spliced in."""
    data = base
    for _ in range(0 if draw(st.booleans()) else draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "insert", "fragment", "delete", "bom"]))
        pos = draw(st.integers(0, len(data)))
        if kind == "truncate":
            data = data[:pos]
        elif kind == "insert":
            data = data[:pos] + draw(st.binary(min_size=1, max_size=8)) + data[pos:]
        elif kind == "fragment":
            frag = draw(st.sampled_from(NASTY_FRAGMENTS)).encode("utf-8")
            data = data[:pos] + frag + data[pos:]
        elif kind == "delete":
            data = data[:pos] + data[pos + draw(st.integers(1, 16)) :]
        else:
            data = b"\xef\xbb\xbf" + data
    return data


# --------------------------------------------------------------------------- #
# 1. config loader
# --------------------------------------------------------------------------- #
class Raw(str):
    """TOML source spliced in verbatim (huge literals, deep nesting)."""


RAW_TOML = [
    Raw("1" * 5000),
    Raw("0x" + "f" * 5000),
    Raw("0o" + "7" * 400),
    Raw("0b" + "1" * 300),
    Raw("[" * 3000 + "]" * 3000),
    Raw("{a=" * 2000 + "1" + "}" * 2000),
    Raw("1_000"),
    Raw("+inf"),
    Raw("-nan"),
    Raw("1979-05-27T07:32:00Z"),
    Raw("07:32:00"),
    Raw("'''multi\nline'''"),
]


def _toml_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def to_toml_value(v) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(to_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return (
            "{" + ", ".join(f"{_toml_string(k)} = {to_toml_value(x)}" for k, x in v.items()) + "}"
        )
    raise TypeError(type(v))


def to_toml(doc: dict) -> str:
    """One ``key = value`` line per top-level key; tables are written inline."""
    return "".join(f"{_toml_string(k)} = {to_toml_value(v)}\n" for k, v in doc.items())


keys = st.text(min_size=1, max_size=12)
scalars = st.one_of(
    st.booleans(),
    st.integers(-1000, 1000),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**400, -(10**400)]),
    st.floats(),  # NaN, ±inf, subnormals, ±0.0
    st.sampled_from([1e308, -1e308, 5e-324, 1e-300, 0.5, 1.0, 0.0, -0.0]),
    st.text(max_size=16),
    st.dates(),
    st.sampled_from(RAW_TOML),
)
any_value = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=6,
)
NAMES = sorted(
    {
        *PRESETS,
        *DEVICES,
        *UNITS,
        *NOTIONS,
        *CANARY_KINDS,
        *ATTACKS,
        *DEFENSES,
        "fixtures",
        "rdp",
        "prv",
    }
)


#: Keys whose valid values are names: mostly draw those, so validation gets past them.
CHOICES = {
    "device": DEVICES,
    "preset": PRESETS,
    "unit": UNITS,
    "notion": NOTIONS,
    "canary_kind": CANARY_KINDS,
    "accountant": ("prv", "rdp"),
}


def typed_value(types, key: str = ""):
    """Values of roughly the right type, including edge values around each check."""
    if types is bool:
        return st.booleans()
    if key in CHOICES:
        return st.one_of(st.sampled_from(sorted(CHOICES[key])), st.sampled_from(NAMES))
    if types is int:
        return st.one_of(
            st.integers(-2, 1100),
            st.integers(0, 30),
            st.sampled_from([0, 1, 8, 20, 100, 512, 513, 1000, 100_000, 2**63 - 1, 2**63]),
        )
    if types is str:
        return st.one_of(st.sampled_from(NAMES), st.text(max_size=16))
    if types is list:
        return st.lists(st.one_of(st.sampled_from(sorted(ATTACKS)), any_value), max_size=5)
    return st.one_of(  # numbers
        st.floats(0, 1, exclude_min=True, exclude_max=True),
        st.floats(),
        st.integers(-3, 3),
        st.sampled_from([1e-5, 0.95, 1.0, 0.0, 8, 1e308, 10**400, 2**63]),
    )


@st.composite
def config_table(draw, name: str) -> dict:
    schema = SCHEMA[name]
    table = {}
    for key in draw(st.lists(st.sampled_from(sorted(schema)), unique=True, max_size=len(schema))):
        table[key] = draw(any_value if draw(rarely(12)) else typed_value(schema[key][0], key))
    if draw(rarely(12)):
        table[draw(keys)] = draw(any_value)
    return table


@st.composite
def defense_entry(draw) -> dict:
    entry: dict = {}
    if not draw(rarely(9)):
        entry["name"] = draw(any_value if draw(rarely(6)) else st.sampled_from(sorted(DEFENSES)))
    if draw(rarely(4)):
        entry["label"] = draw(st.text(max_size=8) | any_value)
    params = {
        **{k: v[0] for k, v in DPSGD.PARAMS.items()},
        **{k: SCHEMA["train"][k][0] for k in TRAIN_OVERRIDES},
    }
    for key in draw(st.lists(st.sampled_from(sorted(params)), unique=True, max_size=4)):
        entry[key] = draw(any_value if draw(rarely(12)) else typed_value(params[key], key))
    if draw(rarely(9)):
        entry[draw(keys)] = draw(any_value)
    return entry


@st.composite
def config_doc(draw) -> dict:
    doc = {}
    top = SCHEMA[""]
    for key in draw(st.lists(st.sampled_from(sorted(top)), unique=True)):
        doc[key] = draw(any_value if draw(rarely(12)) else typed_value(top[key][0], key))
    for sec in draw(st.lists(st.sampled_from(TOP_SECTIONS), unique=True)):
        if sec == "defenses":
            doc[sec] = (
                draw(any_value) if draw(rarely(7)) else draw(st.lists(defense_entry(), max_size=3))
            )
        else:
            doc[sec] = draw(any_value) if draw(rarely(9)) else draw(config_table(sec))
    if draw(rarely(12)):
        doc[draw(keys)] = draw(any_value)
    return doc


def _check_config_file(path: Path, out_dir: Path, cli) -> None:
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).strip(), repr(str(exc))
        event("rejected: " + str(exc).split(":")[0][:40])
    else:
        # Accepted: the resolved config must be writable to results.json as strict JSON.
        event("accepted")
        assert isinstance(cfg, AuditConfig)
        json.loads(dumps_json(cfg.to_dict()))
        return
    # Rejected by the loader, so `run` stops before any training: cheap to run for real.
    assert_one_line_input_error(cli(["run", str(path), "--out", str(out_dir)]), out_dir)


@FUZZ
@given(doc=config_doc(), bom=st.booleans())
@example(doc={"metrics": {"delta": Raw("1" * 5000)}}, bom=False)
@example(doc={"train": {"learning_rate": 10**400}}, bom=False)
@example(doc={"seed": Raw("0x" + "f" * 5000)}, bom=False)
@example(doc={"target": {"max_length": Raw("0x" + "f" * 5000)}}, bom=False)
@example(doc={"defenses": [{"name": "dp-sgd", "epsilon": 10**400}]}, bom=False)
@example(doc={"title": Raw("[" * 3000 + "]" * 3000)}, bom=False)
@example(doc={"data": {"bad\nkey": 1}}, bom=False)
@example(doc={"x\u2028y": 1}, bom=False)
@example(doc={"defenses": [{"name": "no\nsuch"}]}, bom=False)
def test_config_loader_on_structured_documents(doc, bom, cli):
    text = to_toml(doc)
    with _workdir() as d:
        path = d / "audit.toml"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        _check_config_file(path, d / "out", cli)


@FUZZ
@given(
    content=st.one_of(
        st.text().map(lambda s: s.encode("utf-8")),
        st.binary(),
        st.builds(to_toml, config_doc()).map(lambda s: s.encode("utf-8")).flatmap(mutated),
        st.text().map(lambda s: s.encode(st_encoding(s))),
    )
)
@example(content=b"\xff\xfe t\x00i\x00")
@example(content=b'title = "\xe9"\n')
@example(content=b"")
def test_config_loader_on_random_bytes(content, cli):
    with _workdir() as d:
        path = d / "audit.toml"
        path.write_bytes(content)
        _check_config_file(path, d / "out", cli)


def st_encoding(s: str) -> str:
    """A non-UTF-8 encoding that can represent ``s`` (so the file is not UTF-8 text)."""
    for enc in ("utf-16", "latin-1", "cp1252"):
        try:
            s.encode(enc)
            return enc
        except UnicodeEncodeError:
            continue
    return "utf-32"


# --------------------------------------------------------------------------- #
# 2. data loaders: read_table on JSONL and CSV
# --------------------------------------------------------------------------- #
COLS = ("text", "label", "id")

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**300, -(10**300)]),
    st.floats(),  # NaN and ±inf are written as NaN/Infinity, which Python's json reads
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
good_text = st.text(max_size=30)
good_label = st.one_of(st.text(min_size=1, max_size=10), st.integers(-5, 5), st.booleans())
good_id = st.one_of(st.none(), st.just(""), st.text(max_size=10), st.integers(0, 10**6))


@st.composite
def jsonl_record(draw):
    rec = {
        "text": draw(json_values) if draw(rarely(7)) else draw(good_text),
        "label": draw(json_values) if draw(rarely(7)) else draw(good_label),
    }
    if draw(st.booleans()):
        rec["id"] = draw(json_values) if draw(rarely(5)) else draw(good_id)
    for col in draw(st.lists(st.sampled_from(COLS), unique=True, max_size=1)):
        rec.pop(col, None)  # a missing column, now and then
    if draw(rarely(5)):
        rec[draw(st.text(max_size=6))] = draw(json_values)
    return draw(json_values) if draw(rarely(13)) else rec  # sometimes not an object


@st.composite
def jsonl_bytes(draw) -> bytes:
    lines = [
        json.dumps(r, ensure_ascii=draw(st.booleans()), allow_nan=True)
        for r in draw(st.lists(jsonl_record(), max_size=6))
    ]
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = newline.join(lines) + (newline if draw(st.booleans()) else "")
    return draw(mutated(text.encode("utf-8")))


@st.composite
def csv_bytes(draw) -> bytes:
    header = draw(
        st.lists(st.sampled_from([*COLS, "extra", ""]) | st.text(max_size=5), max_size=5)
        if draw(rarely(3))
        else st.permutations([*COLS, *draw(st.sampled_from([[], ["extra"], ["text"]]))])
    )
    buf = io.StringIO(newline="")
    writer = csv.writer(
        buf,
        quoting=draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL])),
        lineterminator=draw(st.sampled_from(["\r\n", "\n"])),
    )
    if not draw(rarely(11)):
        writer.writerow(header)
    odd = st.sampled_from(["", "NaN", "inf", "1e400", "1" * 50])
    for _ in range(draw(st.integers(0, 6))):
        cell = odd if draw(rarely(4)) else st.text(min_size=1, max_size=20)
        n = len(header) + (draw(st.sampled_from([-1, 1])) if draw(rarely(6)) else 0)
        writer.writerow(draw(st.lists(cell, min_size=max(n, 0), max_size=max(n, 0))))
    return draw(mutated(buf.getvalue().encode("utf-8")))


def _check_table(path: Path) -> None:
    try:
        rows = read_table(path, "text", "label", "id")
    except DataError as exc:
        assert "\n" not in str(exc) and str(exc).strip(), repr(str(exc))
        event("rejected")
        return
    event("accepted")
    assert rows, "read_table returned no rows instead of raising DataError"
    for row in rows:
        assert set(row) == {"id", "text", "label"}
        for key, value in row.items():
            assert isinstance(value, str), (key, value)
            # Every string flows into results.json and the report, written as UTF-8.
            value.encode("utf-8")
        assert row["label"] != ""


@FUZZ
@given(content=jsonl_bytes(), suffix=st.sampled_from([".jsonl", ".json", ".ndjson", ".JSONL"]))
@example(content=b'{"text": "a", "label": ' + b"1" * 5000 + b"}\n", suffix=".jsonl")
@example(content=b"[" * 100_000 + b"\n", suffix=".jsonl")
@example(content=b'{"text": "\\ud800", "label": "a"}\n', suffix=".jsonl")
@example(content=b'{"text": "a", "label": "b", "id": "\\udfff"}\n', suffix=".jsonl")
@example(content=b'{"text": "a", "label": NaN}\n', suffix=".jsonl")
@example(content=b"\xef\xbb\xbf", suffix=".jsonl")
def test_read_table_on_random_jsonl(content, suffix):
    with _workdir() as d:
        path = d / f"rows{suffix}"
        path.write_bytes(content)
        _check_table(path)


@FUZZ
@given(content=st.one_of(csv_bytes(), st.binary()), suffix=st.sampled_from([".csv", ".CSV"]))
@example(content=b"text,label\n" + b"x" * 140_000 + b",a\n", suffix=".csv")
@example(content=b'text,label\n"unterminated,a\n', suffix=".csv")
@example(content=b"text,label\na\x00b,c\n", suffix=".csv")
@example(content=b"\xef\xbb\xbftext,label\n", suffix=".csv")
@example(content=b"", suffix=".csv")
def test_read_table_on_random_csv(content, suffix):
    with _workdir() as d:
        path = d / f"rows{suffix}"
        path.write_bytes(content)
        _check_table(path)


@FUZZ
@given(content=st.binary(), suffix=st.sampled_from([".jsonl", ".csv", ".txt", ""]))
def test_read_table_on_random_bytes(content, suffix):
    with _workdir() as d:
        path = d / f"rows{suffix}"
        path.write_bytes(content)
        _check_table(path)


valid_rows = st.lists(
    st.fixed_dictionaries({"text": good_text, "label": good_label}, optional={"id": good_id}),
    min_size=1,
    max_size=6,
)


def _expected(rows: list[dict], stem: str) -> list[dict]:
    return [
        {
            "id": str(r["id"]) if r.get("id") not in (None, "") else f"{stem}-{i}",
            "text": r["text"],
            "label": str(r["label"]),
        }
        for i, r in enumerate(rows)
    ]


@FUZZ
@given(rows=valid_rows, ensure_ascii=st.booleans(), newline=st.sampled_from(["\n", "\r\n"]))
@example(rows=[{"text": "line\u2028separator", "label": "a"}], ensure_ascii=False, newline="\n")
@example(rows=[{"text": "next\x85line", "label": "a"}], ensure_ascii=False, newline="\n")
def test_jsonl_round_trip(rows, ensure_ascii, newline):
    """A file written by ``json.dumps`` reads back exactly (any Unicode text)."""
    with _workdir() as d:
        path = d / "rows.jsonl"
        text = "".join(json.dumps(r, ensure_ascii=ensure_ascii) + newline for r in rows)
        path.write_bytes(text.encode("utf-8"))
        assert read_table(path, "text", "label", "id") == _expected(rows, "rows")


@FUZZ
@given(
    rows=valid_rows, quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]), bom=st.booleans()
)
@example(rows=[{"text": "form\x0cfeed", "label": "a"}], quoting=csv.QUOTE_MINIMAL, bom=False)
@example(rows=[{"text": "carriage\rreturn", "label": "a"}], quoting=csv.QUOTE_MINIMAL, bom=False)
@example(rows=[{"text": "quoted\r\nnewline", "label": "a"}], quoting=csv.QUOTE_MINIMAL, bom=True)
def test_csv_round_trip(rows, quoting, bom):
    """A file written by ``csv.writer`` (what spreadsheets export) reads back exactly."""
    rows = [{**r, "label": str(r["label"])} for r in rows]
    with _workdir() as d:
        path = d / "rows.csv"
        buf = io.StringIO(newline="")
        writer = csv.writer(buf, quoting=quoting)
        writer.writerow(["id", "text", "label"])
        for r in rows:
            rid = r.get("id")
            writer.writerow(["" if rid is None else str(rid), r["text"], r["label"]])
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode("utf-8"))
        assert read_table(path, "text", "label", "id") == _expected(rows, "rows")


# --------------------------------------------------------------------------- #
# 3. score files: score_file and `privacy-audit score`
# --------------------------------------------------------------------------- #
SCORE_VALUES = st.one_of(
    st.floats(-1e6, 1e6).map(repr),
    st.floats().map(repr),  # nan, inf, 1e308, 5e-324
    st.sampled_from(
        ["", " ", "nan", "-inf", "Infinity", "1e400", "1_0", "0x10", " 1.5 ", "1" * 400]
    ),
    st.text(max_size=6),
)
MEMBER_VALUES = st.one_of(
    st.sampled_from(["0", "1", "true", "false", "TRUE", " 1 ", "", "yes", "2", "1.0"]),
    st.text(max_size=4),
)


@st.composite
def score_csv(draw) -> bytes:
    if draw(rarely(8)):
        return draw(st.binary())
    header = draw(
        st.lists(
            st.sampled_from(["score", "member", "id", "other"]) | st.text(max_size=5), max_size=4
        )
        if draw(rarely(4))
        else st.permutations(["score", "member", "id"]) | st.just(["score", "member"])
    )
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator=draw(st.sampled_from(["\r\n", "\n"])))
    writer.writerow(header)
    odd = {"score": SCORE_VALUES, "member": MEMBER_VALUES, "id": st.text(max_size=6)}
    good = {
        "score": st.floats(allow_nan=False, allow_infinity=False).map(repr),
        "member": st.sampled_from(["0", "1", "true", "false", "TRUE", " 1 "]),
        "id": st.text(max_size=6),
    }
    for _ in range(draw(st.integers(0, 12))):
        cells = odd if draw(rarely(8)) else good
        row = [draw(cells.get(col, st.text(max_size=4))) for col in header]
        if draw(rarely(11)):
            row = row[: draw(st.integers(0, len(row)))]  # a short row
        writer.writerow(row)
    return draw(mutated(buf.getvalue().encode("utf-8")))


@FUZZ
@given(content=score_csv())
@example(content=b"score,member\n" + b"x" * 140_000 + b",1\n")
@example(content=b'score,member\n"1,1\n')
@example(content=b"score,member\n1,1\n2,0\n1e400,1\n0,0\n")
@example(content=b"score,member,id\n1,1,a\n2,0,a\n1,1,b\n0,0,c\n")
@example(content=b"\xef\xbb\xbf")
def test_score_file_and_cli_on_random_csv(content, cli):
    """``score_file`` returns strict-JSON results or raises AuditError; on a rejection the
    CLI exits 2 with one line and writes nothing. (Accepted files are rendered, which
    takes about a second each, by the test below.)"""
    with _workdir() as d:
        path, out = d / "scores.csv", d / "out"
        path.write_bytes(content)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                results = score_file(path, 1e-5, n_boot=100, seed=0)
        except AuditError as exc:
            assert "\n" not in str(exc) and str(exc).strip(), repr(str(exc))
            event("rejected: " + str(exc).split(": ", 1)[-1][:40])
        else:
            event("accepted")
            json.loads(dumps_json(results))
            return
        assert_one_line_input_error(
            cli(["score", str(path), "--bootstrap", "100", "--out", str(out)]), out
        )


@st.composite
def accepted_scores(draw) -> bytes:
    """Score files the loader accepts: at least two members and two non-members."""
    score = st.one_of(
        st.floats(-1e6, 1e6),
        # Wider magnitudes, but with max - min finite: see the known bug below.
        st.floats(-1e300, 1e300),
        st.sampled_from([0.0, -0.0, 5e-324, 1e-300, 1.0]),
    )
    members = draw(st.lists(st.sampled_from(["1", "true", "0", "false"]), min_size=4, max_size=24))
    members[:4] = ["1", "0", "true", "false"]
    members = draw(st.permutations(members))
    header = draw(st.sampled_from([["score", "member"], ["id", "member", "score"]]))
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(header)
    for i, m in enumerate(members):
        row = {"score": repr(draw(score)), "member": m, "id": f"ex-{i}"}
        writer.writerow([row[c] for c in header])
    return buf.getvalue().encode("utf-8")


@settings(FUZZ, max_examples=6)
@given(content=accepted_scores())
def test_score_cli_renders_every_accepted_file(content, cli):
    """The full ``score`` command (metrics, plots, report) on files the loader accepts:
    exit 0 and both outputs, never an internal error. Few examples: each renders plots."""
    with _workdir() as d:
        path, out = d / "scores.csv", d / "out"
        path.write_bytes(content)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            outcome = cli(["score", str(path), "--bootstrap", "100", "--out", str(out)])
        assert outcome.code == 0, outcome.stderr
        assert "Traceback" not in outcome.stderr
        json.loads((out / "results.json").read_text(encoding="utf-8"))
        assert (out / "report.html").stat().st_size > 1000


def test_score_cli_with_scores_spanning_the_float_range(tmp_path, cli):
    path, out = tmp_path / "scores.csv", tmp_path / "out"
    path.write_text("score,member\n1e308,1\n-1e308,0\n1e308,1\n-1e308,0\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outcome = cli(["score", str(path), "--bootstrap", "100", "--out", str(out)])
    assert outcome.code in (0, 2), outcome.stderr


# --------------------------------------------------------------------------- #
# 4. issue 17: every bad input of the CI-user fuzzing is exit 2, one line, no OUT state
# --------------------------------------------------------------------------- #
#: Every run's output directory must stay absent or empty after a rejection.
def _no_out_state(out_dir: Path) -> None:
    assert not out_dir.exists() or not any(out_dir.iterdir()), list(out_dir.iterdir())


def _results_doc(**over) -> dict:
    att = {
        "attack": "loss",
        "status": "ok",
        "metrics": {
            k: {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}
            for k in ("auc", "tpr_at_fpr_0.01", "tpr_at_fpr_0.001", "advantage")
        }
        | {"epsilon_lower_bound": {"value": 0.0, "ci_low": 0.0, "ci_high": None}},
    }
    run = {"name": "r", "defense": "none", "claim": {"notion": "none"}, "attacks": [att]}
    doc = {"schema_version": 1, "tool": {"name": "privacy-audit"}, "runs": [run]}
    for path, value in over.items():
        node = doc
        *head, last = path.split("/")
        for k in head:
            node = node[int(k)] if isinstance(node, list) else node[k]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return doc


DEEP = "[" * 100_000 + "]" * 100_000
GATE_CASES = {
    "metrics-as-list": json.dumps(_results_doc(**{"runs/0/attacks/0/metrics": [0.5]})),
    "5000-digit-number": json.dumps(_results_doc()).replace(
        '"value": 0.5', '"value": ' + "9" * 5000, 1
    ),
    "nested-100000-deep": DEEP,
    "runs-not-a-list": json.dumps(_results_doc(runs={"r": 1})),
    "run-not-an-object": json.dumps(_results_doc(**{"runs/0": "r"})),
    "attacks-not-a-list": json.dumps(_results_doc(**{"runs/0/attacks": "loss"})),
    "metric-value-a-string": json.dumps(
        _results_doc(**{"runs/0/attacks/0/metrics/auc": {"value": "0.5"}})
    ),
    "leakage-not-a-list": json.dumps(_results_doc(**{"runs/0/leakage": {"a": 1}})),
    "epsilon-audit-not-an-object": json.dumps(_results_doc(**{"runs/0/epsilon_audit": [1]})),
    "not-utf8": b"\xff\xfe{".decode("latin-1"),
    "top-level-list": "[]",
}


@pytest.mark.parametrize("case", sorted(GATE_CASES))
def test_gate_regression_cases_exit_2(case, tmp_path, cli):
    text = GATE_CASES[case]
    bad = tmp_path / "bad.json"
    bad.write_bytes(text.encode("latin-1") if case == "not-utf8" else text.encode("utf-8"))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_results_doc()), encoding="utf-8")
    out = tmp_path / "out"
    junit = out / "junit.xml"
    assert_one_line_input_error(
        cli(["gate", str(bad), "--max-auc", "0.9", "--junit", str(junit)]), out
    )
    # the same file as --baseline
    assert_one_line_input_error(
        cli(["gate", str(good), "--baseline", str(bad), "--junit", str(junit)]), out
    )


COMPARE_CASES = {
    "runs-wrong-type": {"runs": "x"},
    "run-wrong-type": {"runs/0": 5},
    "claim-wrong-type": {"runs/0/claim": ["eps", 3]},
    "claim-epsilon-a-string": {"runs/0/claim": {"epsilon": "3"}},
    "metrics-wrong-type": {"runs/0/attacks/0/metrics": [1, 2]},
    "metric-wrong-type": {"runs/0/attacks/0/metrics/auc": 0.5},
    "metric-ci-a-string": {"runs/0/attacks/0/metrics/auc": {"value": 0.5, "ci_low": "a"}},
    "attacks-wrong-type": {"runs/0/attacks": {"loss": 1}},
    "utility-wrong-type": {"runs/0/utility": "high"},
    "epsilon-audit-wrong-type": {"runs/0/epsilon_audit": {"audits": [{"epsilon_lb": "9"}]}},
}


@pytest.mark.parametrize("case", sorted(COMPARE_CASES) + ["nested-100000-deep"])
def test_compare_regression_cases_exit_2(case, tmp_path, cli):
    good, bad = tmp_path / "a" / "results.json", tmp_path / "b" / "results.json"
    good.parent.mkdir()
    bad.parent.mkdir()
    good.write_text(json.dumps(_results_doc()), encoding="utf-8")
    text = DEEP if case not in COMPARE_CASES else json.dumps(_results_doc(**COMPARE_CASES[case]))
    bad.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    assert_one_line_input_error(cli(["compare", str(good), str(bad), "--out", str(out)]), out)


RUN_CASES = {
    "device-cuda-on-cpu-torch": ('device = "cuda"\n', "no CUDA GPU"),
    "dp-sgd-epsilon-1e-300": ('[[defenses]]\nname = "dp-sgd"\nepsilon = 1e-300\n', "[0.01, 50]"),
    "dp-sgd-epsilon-1e308": ('[[defenses]]\nname = "dp-sgd"\nepsilon = 1e308\n', "calibrate"),
    "dp-sgd-rdp-epsilon-1e308": (
        '[[defenses]]\nname = "dp-sgd"\naccountant = "rdp"\nepsilon = 1e308\n',
        "[0.01, 1e+09]",
    ),
    "dp-sgd-delta-0.5": ('[[defenses]]\nname = "dp-sgd"\ndelta = 0.5\n', "δ in"),
    "sweep-epsilon-1e308": (
        '[[defenses]]\nname = "dp-sgd"\n[sweep]\nepsilons = [1.0, 1e308]\n',
        "calibrate",
    ),
    "dp-attention-layer-99": ('[[defenses]]\nname = "dp-attention"\nlayers = [99]\n', "layer 99"),
    "report-bench-missing": ('[report]\nbench = "nope.json"\n', "does not exist"),
    "report-bench-not-a-bench": ('[report]\nbench = "bench.json"\n', "cost-of-privacy"),
    "report-bench-nested-deep": ('[report]\nbench = "deep.json"\n', "nested"),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_run_regression_cases_exit_2_before_any_work(case, tmp_path, cli):
    toml, words = RUN_CASES[case]
    (tmp_path / "bench.json").write_text('{"schema": "x", "benchmarks": []}', encoding="utf-8")
    (tmp_path / "deep.json").write_text(DEEP, encoding="utf-8")
    cfg = tmp_path / "audit.toml"
    cfg.write_text(toml, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out)])
    assert_one_line_input_error(outcome, out)
    assert words in outcome.stderr, outcome.stderr
    _no_out_state(out)


def test_run_dir_that_is_a_file_exit_2(tmp_path, cli):
    f = tmp_path / "afile"
    f.write_text("x", encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", "--out", str(out), "--run-dir", str(f)])
    assert_one_line_input_error(outcome, out)
    assert "is a file" in outcome.stderr
    outcome = cli(["run", "--out", str(f / "sub")])
    assert outcome.code == 2 and "is a file" in outcome.stderr


def test_resumed_run_with_an_emptied_task_file_exit_2(tmp_path, cli, tiny_config_path):
    """A task file replaced by ``{}`` is reported before any training (was a KeyError)."""
    from privacy_audit.audit.scale.plan import plan

    cfg = load_config(tiny_config_path)
    first = plan(cfg, False).trial_tasks[0]
    out = tmp_path / "out"
    task_file = out / "run" / "tasks" / f"{first.key}.json"
    task_file.parent.mkdir(parents=True)
    task_file.write_text("{}", encoding="utf-8")
    outcome = cli(["run", str(tiny_config_path), "--out", str(out), "--resume", "--quiet"])
    assert outcome.code == 2, outcome.stderr
    assert len(outcome.stderr.splitlines()) == 1 and "Traceback" not in outcome.stderr
    assert "not a finished audit-trial result" in outcome.stderr
    assert not (out / "results.json").exists() and not (out / "report.html").exists()
    assert task_file.read_text() == "{}"


# generated inputs: structurally random results files for gate and compare
result_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(),
    st.integers(-5, 5),
    st.sampled_from([10**30, "0.5", "", "NaN", [], {}, [0.5]]),
)


@st.composite
def mutated_results(draw) -> str:
    doc = _results_doc()
    paths = [
        "runs",
        "runs/0",
        "runs/0/name",
        "runs/0/attacks",
        "runs/0/attacks/0",
        "runs/0/attacks/0/status",
        "runs/0/attacks/0/attack",
        "runs/0/attacks/0/metrics",
        "runs/0/attacks/0/metrics/auc",
        "runs/0/attacks/0/metrics/auc/value",
        "runs/0/attacks/0/metrics/auc/ci_high",
        "runs/0/attacks/0/metrics/tpr_at_fpr_0.01/value",
        "runs/0/attacks/0/metrics/epsilon_lower_bound/value",
        "runs/0/claim",
        "runs/0/leakage",
        "runs/0/epsilon_audit",
        "runs/0/utility",
        "schema_version",
    ]
    for path in draw(st.lists(st.sampled_from(paths), max_size=3, unique=True)):
        try:
            doc = _results_doc(
                **{path: draw(st.one_of(result_leaves, st.lists(result_leaves, max_size=2)))}
            )
        except (KeyError, IndexError, TypeError):
            pass
    text = json.dumps(doc, allow_nan=True)
    return draw(mutated(text.encode("utf-8"))).decode("utf-8", "replace")


GATE_ARGS = st.sampled_from(
    [
        ["--max-auc", "0.9"],
        ["--max-tpr-at-1pct-fpr", "0.5", "--strict"],
        ["--max-epsilon-lb", "2"],
        ["--max-leakage", "extraction-rate=0.1"],
        ["--max-auc", "60"],
    ]
)


@settings(FUZZ, max_examples=200)
@given(text=mutated_results(), args=GATE_ARGS, as_baseline=st.booleans())
def test_gate_on_generated_results(text, args, as_baseline, cli):
    """exit 0 or 1 (a decision, printed on stdout) or 2 (one stderr line); never 3."""
    with _workdir() as d:
        bad, good = d / "r.json", d / "good.json"
        bad.write_text(text, encoding="utf-8")
        good.write_text(json.dumps(_results_doc()), encoding="utf-8")
        argv = (
            ["gate", str(good), "--baseline", str(bad)]
            if as_baseline
            else ["gate", str(bad), *args]
        )
        outcome = cli(argv)
        event(f"gate exit {outcome.code}")
        assert outcome.code in (0, 1, 2), outcome.stderr
        assert "Traceback" not in outcome.stdout + outcome.stderr
        if outcome.code == 2:
            assert_one_line_input_error(outcome, d / "none")
        else:
            assert outcome.stderr == "" and "privacy gate" in outcome.stdout


@settings(FUZZ, max_examples=60)
@given(text=mutated_results())
def test_compare_on_generated_results(text, cli):
    """Generated inputs that compare rejects: exit 2, one line, nothing written. (Accepted
    ones render plots, seconds each, so they are only counted, not rendered, here.)"""
    from privacy_audit.audit.commands.compare import check_schemas, load_for_compare

    with _workdir() as d:
        a, b = d / "a" / "results.json", d / "b" / "results.json"
        a.parent.mkdir()
        b.parent.mkdir()
        a.write_text(json.dumps(_results_doc()), encoding="utf-8")
        b.write_text(text, encoding="utf-8")
        try:
            check_schemas([load_for_compare(a), load_for_compare(b)])
        except AuditError as exc:
            assert "\n" not in str(exc)
            event("compare exit 2")
            out = d / "out"
            assert_one_line_input_error(cli(["compare", str(a), str(b), "--out", str(out)]), out)
        else:
            event("compare accepted")


# --------------------------------------------------------------------------- #
# 5. issue 17: bounded work on a 20 MB line (max_length tokens, not megabytes)
# --------------------------------------------------------------------------- #
def test_a_20_mb_line_is_cut_before_tokenizing(tmp_path):
    import time

    from privacy_audit import fixtures
    from privacy_audit.audit.textcap import CHARS_PER_TOKEN, cap_text
    from privacy_audit.targets.lm import build_tokenizer

    bert = fixtures.load_tokenizer()
    word = build_tokenizer("word")
    normal = " ".join(r["text"] for r in fixtures.load_corpus()[:200])
    assert len(normal) > 64 * 64
    for max_length in (8, 16, 64):
        # the cut never changes what a tokenizer keeps of an ordinary text
        a = bert(normal, truncation=True, max_length=max_length)["input_ids"]
        b = bert(cap_text(normal, max_length), truncation=True, max_length=max_length)["input_ids"]
        assert a == b
        a = word.encode([normal], max_length)[0].tolist()
        b = word.encode([cap_text(normal, max_length)], max_length)[0].tolist()
        assert a == b
    huge = ("word " * 4_000_000)[:20_000_000]
    members = tmp_path / "members.jsonl"
    members.write_text(json.dumps({"text": huge, "label": "a"}) + "\n", encoding="utf-8")
    start = time.perf_counter()
    (row,) = read_table(members, "text", "label", "id")
    capped = cap_text(row["text"], 16)
    assert len(capped) == 16 * CHARS_PER_TOKEN
    ids = bert([capped], truncation=True, max_length=16, padding="max_length")["input_ids"][0]
    assert len(ids) == 16
    assert time.perf_counter() - start < 30
