"""``privacy-audit dp-check SETUP.py``: hostile and bad inputs, through the real CLI.

Every case writes a small SETUP.py (a 16x4 linear model, 64 rows) into its own folder and
runs ``python -m privacy_audit dp-check SETUP.py --out DIR --budget 30 --quiet`` in a
subprocess (``--budget 2`` or ``5`` where a case runs every check before its bug shows).
Bad input is exit 2: exactly one line on stderr, ``privacy-audit: error: ...``, naming the
missing name, the key or the wrong type; no traceback; nothing written to ``--out``. Exit 3
(internal error) must never answer bad input. Two bundled setups are the positive controls
(0 consistent, 1 VIOLATED), and the two tiny setups every case breaks in one place run
consistent.

A case that shows a product bug expects the correct behaviour and is a strict xfail whose
reason says what happens instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUPS = ROOT / "fixtures" / "dp_setups"
CHECK_NAMES = (
    "noise",
    "sensitivity",
    "coverage",
    "sampling",
    "schedule",
    "accounting",
    "cross-example",
    "model-clipping",
    "outside-release",
)

# --------------------------------------------------------------------------- #
# the SETUP.py pieces: a tiny, correct Opacus setup and a tiny, correct privatize one
# --------------------------------------------------------------------------- #

IMPORTS = """\
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
"""

MAKE_DATASET = """
def make_dataset():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=g)
    return TensorDataset(x, torch.randint(0, 4, (64,), generator=g))
"""

MAKE_PRIVATE = """
def make_private(data):
    from opacus import PrivacyEngine

    model = nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return PrivacyEngine().make_private(
        module=model,
        optimizer=optimizer,
        data_loader=DataLoader(data, batch_size=8),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
"""

PARAMS = 'PARAMS = {"w": (16, 4), "b": (4,)}\n'

PRIVATIZE = """
def privatize(per_example_grads):
    g = per_example_grads
    n = g["w"].shape[0]
    flat = np.concatenate([g["w"].reshape(n, -1), g["b"].reshape(n, -1)], axis=1)
    f = np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(flat, axis=1), 1e-12))
    return {
        "w": (g["w"] * f[:, None, None]).sum(0) + np.random.normal(0.0, 1.0, (16, 4)),
        "b": (g["b"] * f[:, None]).sum(0) + np.random.normal(0.0, 1.0, (4,)),
    }
"""

MAKE_LOADER = """
class PoissonBatches:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return 8

    def __iter__(self):
        for _ in range(len(self)):
            yield np.nonzero(np.random.random(self.n) < 0.125)[0].tolist()


def make_loader(dataset):
    return PoissonBatches(len(dataset))
"""

#: source expressions; ε: Opacus's PRV accountant for σ = 1, q = 1/8, 8 steps, δ = 1e-5
GOOD_CLAIM = {
    "epsilon": "3.184966640796722",
    "delta": "1e-05",
    "noise_multiplier": "1.0",
    "max_grad_norm": "1.0",
    "sample_rate": "0.125",
    "epochs": "1",
}
DROP = object()


def claim(**changes) -> str:
    """``CLAIM = {...}``: the good claim with keys replaced (source text) or dropped."""
    c = dict(GOOD_CLAIM)
    for k, v in changes.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    body = "".join(f"    {k!r}: {v},\n" for k, v in c.items())
    return "CLAIM = {\n" + body + "}\n"


def opacus(make_dataset=MAKE_DATASET, make_private=MAKE_PRIVATE, claim_src=None, extra=""):
    """An Opacus-protocol SETUP.py; pass "" to leave a function out."""
    return IMPORTS + make_dataset + make_private + extra + "\n" + (claim_src or claim())


def privatize(params=PARAMS, fn=PRIVATIZE, loader=MAKE_DATASET + MAKE_LOADER, extra=""):
    """A privatize-protocol SETUP.py; pass "" to leave a piece out."""
    return IMPORTS + params + fn + loader + extra + "\n" + claim()


def line_of(source: str, marker: str) -> str:
    """``line N`` of the first line of ``source`` containing ``marker``."""
    for i, text in enumerate(source.splitlines(), start=1):
        if marker in text:
            return f"line {i}"
    raise AssertionError(marker)


def returning(value: str) -> str:
    """``make_private`` returning ``value`` (source text, may use model/optimizer/loader)."""
    return f"""
def make_private(data):
    model = nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(data, batch_size=8)
    return {value}
"""


def dataset_returning(value: str) -> str:
    return f"\ndef make_dataset():\n    return {value}\n"


def privatize_returning(value: str) -> str:
    return f"\ndef privatize(per_example_grads):\n    return {value}\n"


SYNTAX_ERROR = IMPORTS + "\ndef make_dataset(:\n    return 1\n"
IMPORT_RAISES = IMPORTS + "\nX = 1\nraise ValueError('no data directory here')\n" + claim()
DATASET_RAISES = opacus(
    make_dataset="\ndef make_dataset():\n    raise FileNotFoundError('train.csv is not here')\n"
)
PRIVATE_RAISES = opacus(
    make_private="\ndef make_private(data):\n    raise RuntimeError('CUDA out of memory')\n"
)
MULTILINE_RAISES = opacus(
    make_dataset="\ndef make_dataset():\n    raise ValueError('first line\\nsecond line')\n"
)
LOADER_RAISES = opacus(
    make_private=MAKE_PRIVATE.replace("return PrivacyEngine", "m, o, _ = PrivacyEngine").rstrip()
    + """
    class Loader:
        def __iter__(self):
            raise OSError("the shard server is gone")

    return m, o, Loader()
"""
)

# --------------------------------------------------------------------------- #
# the cases
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Case:
    id: str
    source: str | None  # the SETUP file's text; None: no file at all
    words: tuple[str, ...] = ()  # what the one error line names
    args: tuple[str, ...] = ()  # extra CLI arguments
    code: int | tuple[int, ...] = 2  # not 2: the exit codes allowed, never 3 or a traceback
    timeout: int = 150  # seconds the command may take
    name: str = "setup.py"  # the SETUP file's name
    directory: bool = False  # SETUP is a directory of that name
    raw: bytes | None = None  # the SETUP file's bytes, when not text


CASES = [
    # the SETUP file itself
    Case("missing-file", None, ("does not exist", "nope.py"), name="nope.py"),
    Case("setup-is-a-directory", None, ("is not a file", "setup.py"), directory=True),
    Case("not-a-py-file", opacus(), ("Python file", ".py", "setup.txt"), name="setup.txt"),
    Case("syntax-error", SYNTAX_ERROR, ("syntax error", line_of(SYNTAX_ERROR, "def make_"))),
    Case(
        "not-utf-8",
        None,
        ("syntax error", "line 1", "utf-8"),
        raw=b"\xff\xfe CLAIM = 1\n",
    ),
    Case(
        "raises-at-import",
        IMPORT_RAISES,
        ("importing setup.py", "ValueError", "no data directory", line_of(IMPORT_RAISES, "raise")),
    ),
    Case(
        "sys-exit-at-import",
        IMPORTS + "import sys\nsys.exit(0)\n" + claim(),
        ("setup.py", "SystemExit"),
    ),
    # CLAIM
    Case("no-claim", IMPORTS + MAKE_DATASET + MAKE_PRIVATE, ("no CLAIM",)),
    Case("claim-not-a-dict", opacus(claim_src="CLAIM = [8.0, 1e-5]\n"), ("CLAIM", "dict", "list")),
    *[
        Case(f"claim-missing-{k}", opacus(claim_src=claim(**{k: DROP})), ("CLAIM", f"'{k}'"))
        for k in ("epsilon", "delta", "noise_multiplier", "max_grad_norm", "sample_rate")
    ],
    Case("claim-no-schedule", opacus(claim_src=claim(epochs=DROP)), ("'epochs'", "'steps'")),
    Case(
        "claim-unknown-key",
        opacus(claim_src=claim(learning_rate="0.1")),
        ("unknown key", "'learning_rate'"),
    ),
    *[
        Case(f"epsilon-{label}", opacus(claim_src=claim(epsilon=v)), ("CLAIM['epsilon']", *w))
        for label, v, w in (
            ("zero", "0", ("0",)),
            ("negative", "-1.5", ("-1.5",)),
            ("nan", "float('nan')", ("nan",)),
            ("inf", "float('inf')", ("inf",)),
            ("string", "'8.0'", ("number", "str")),
            ("bool", "True", ("number", "bool")),
        )
    ],
    *[
        Case(f"delta-{label}", opacus(claim_src=claim(delta=v)), ("CLAIM['delta']", "(0, 1)", v))
        for label, v in (("zero", "0"), ("one", "1"), ("1.5", "1.5"))
    ],
    *[
        Case(
            f"sample-rate-{label}",
            opacus(claim_src=claim(sample_rate=v)),
            ("CLAIM['sample_rate']", v),
        )
        for label, v in (("zero", "0"), ("1.5", "1.5"))
    ],
    Case(
        "max-grad-norm-empty-list",
        opacus(claim_src=claim(max_grad_norm="[]")),
        ("CLAIM['max_grad_norm']", "empty"),
    ),
    Case(
        "max-grad-norm-negative-layer",
        opacus(claim_src=claim(max_grad_norm="[1, -1]")),
        ("CLAIM['max_grad_norm']", "-1"),
    ),
    Case(
        "epochs-fractional",
        opacus(claim_src=claim(epochs="1.5")),
        ("CLAIM['epochs']", "whole number", "1.5"),
    ),
    *[
        Case(
            f"{key}-unknown",
            opacus(claim_src=claim(**{key: "'sometimes'"})),
            (f"CLAIM['{key}']", "'sometimes'", *allowed),
        )
        for key, allowed in (
            ("adjacency", ("add-remove", "replace-one")),
            ("sampling", ("poisson", "shuffle")),
            ("unit", ("example", "user")),
        )
    ],
    # the protocol's names
    Case("neither-protocol", opacus(make_private=""), ("make_private", "privatize", "neither")),
    Case("both-protocols", opacus(extra=PARAMS + PRIVATIZE), ("both", "make_private", "privatize")),
    Case("make-private-without-make-dataset", opacus(make_dataset=""), ("make_dataset",)),
    Case(
        "make-private-not-callable",
        opacus(make_private="\nmake_private = 3\n"),
        ("make_private", "function", "int"),
    ),
    # what the functions return or raise
    Case("dataset-int", opacus(make_dataset=dataset_returning("64")), ("make_dataset()", "int")),
    Case("dataset-empty", opacus(make_dataset=dataset_returning("[]")), ("make_dataset()", "0")),
    Case(
        "dataset-one-element",
        opacus(make_dataset=dataset_returning("[(torch.zeros(16), 0)]")),
        ("make_dataset()", "1 example"),
    ),
    Case(
        "dataset-generator",
        opacus(make_dataset=dataset_returning("(i for i in range(64))")),
        ("make_dataset()", "map-style", "generator"),
    ),
    Case(
        "dataset-raises",
        DATASET_RAISES,
        ("make_dataset()", "FileNotFoundError", "train.csv", line_of(DATASET_RAISES, "raise")),
    ),
    Case(
        "dataset-raises-multiline-message",
        MULTILINE_RAISES,
        ("make_dataset()", "ValueError: first line (", line_of(MULTILINE_RAISES, "raise")),
    ),
    Case(
        "make-private-raises",
        PRIVATE_RAISES,
        ("make_private(dataset)", "RuntimeError", "CUDA", line_of(PRIVATE_RAISES, "raise")),
    ),
    Case(
        "make-private-returns-none",
        opacus(make_private=returning("None")),
        ("make_private", "NoneType"),
    ),
    Case(
        "make-private-returns-2-tuple",
        opacus(make_private=returning("model, optimizer")),
        ("make_private", "length 2"),
    ),
    Case(
        "make-private-model-not-a-module",
        opacus(make_private=returning("'model', optimizer, loader")),
        ("make_private", "model", "str", "nn.Module"),
    ),
    Case(
        "make-private-plain-sgd",
        opacus(make_private=returning("model, optimizer, loader")),
        ("make_private", "SGD", "DPOptimizer", "privatize"),
    ),
    Case(
        "make-private-loader-not-iterable",
        opacus(
            make_private=MAKE_PRIVATE.replace(
                "return PrivacyEngine", "m, o, _ = PrivacyEngine"
            ).rstrip()
            + "\n    return m, o, 8\n"
        ),
        ("make_private", "data loader", "int"),
    ),
    Case(
        "make-private-freezes-every-parameter",
        opacus(
            make_private=MAKE_PRIVATE.replace(
                "model = nn.Linear(16, 4)", "model = nn.Linear(16, 4).requires_grad_(False)"
            )
        ),
        ("optimizer", "no trainable parameter"),
    ),
    Case(
        "loader-raises-when-iterated",
        LOADER_RAISES,
        ("data loader", "OSError", "shard server"),
    ),
    Case("privatize-without-params", privatize(params=""), ("privatize", "PARAMS")),
    Case(
        "params-negative-shape",
        privatize(params='PARAMS = {"w": (16, -4), "b": (4,)}\n'),
        ("PARAMS['w']", "positive ints", "-4"),
    ),
    Case(
        "params-non-int-shape",
        privatize(params='PARAMS = {"w": (16, 4.0), "b": (4,)}\n'),
        ("PARAMS['w']", "positive ints", "4.0"),
    ),
    Case(
        "privatize-returns-list",
        privatize(fn=privatize_returning("[np.zeros((16, 4)), np.zeros(4)]")),
        ("privatize", "dict", "list"),
    ),
    Case(
        "privatize-misses-a-name",
        privatize(fn=privatize_returning('{"w": np.zeros((16, 4))}')),
        ("privatize", "'b'"),
    ),
    Case(
        "privatize-wrong-shape",
        privatize(fn=privatize_returning('{"w": np.zeros((4, 16)), "b": np.zeros(4)}')),
        ("privatize", "'w'", "shape", "(4, 16)", "(16, 4)"),
    ),
    Case(
        "privatize-raises",
        privatize(fn=privatize_returning("1 / 0")),
        ("privatize(per_example_grads)", "ZeroDivisionError", "line"),
    ),
    Case(
        "make-loader-without-make-dataset",
        privatize(loader=MAKE_LOADER),
        ("make_loader", "make_dataset"),
    ),
    # the command line
    *[
        Case(f"budget-{label}", opacus(), ("--budget", v), args=("--budget", v))
        for label, v in (("zero", "0"), ("negative", "-5"), ("nan", "nan"))
    ],
    Case(
        "accept-untested-bogus",
        opacus(),
        ("--accept-untested", "'bogus'", "allowed", *CHECK_NAMES),
        args=("--accept-untested", "bogus"),
    ),
    Case(
        "accept-untested-typo",
        opacus(),
        ("--accept-untested", "'samplng'", "did you mean sampling"),
        args=("--accept-untested", "noise,samplng"),
    ),
    Case(
        "seed-too-large",
        opacus(),
        ("--seed",),
        args=("--seed", str(2**70)),
    ),
    Case(
        "seed-negative",
        opacus(),
        ("--seed",),
        args=("--seed", "-1"),
    ),
    # hostile values that pass the type checks
    Case(
        "epsilon-huge-int",
        opacus(claim_src=claim(epsilon="10**400")),
        ("CLAIM['epsilon']",),
    ),
    Case(
        "params-too-large",
        privatize(params='PARAMS = {"w": (10**9, 10**9)}\n', loader=""),
        ("PARAMS['w']",),
    ),
    Case(
        "privatize-returns-strings",
        privatize(fn=privatize_returning('{"w": [["a"] * 4] * 16, "b": np.zeros(4)}')),
        ("privatize", "'w'"),
    ),
    Case(
        "privatize-returns-nan",
        privatize(fn=privatize_returning('{"w": np.full((16, 4), np.nan), "b": np.zeros(4)}')),
        ("privatize", "'w'"),
        args=("--budget", "5"),
    ),
    Case(
        "schedule-beyond-the-accountant",
        opacus(claim_src=claim(epochs=DROP, steps="80000")),
        code=(1, 4),
        args=("--budget", "2"),
    ),
    Case(
        "schedule-of-1e300-steps-keeps-the-budget",
        opacus(claim_src=claim(sample_rate="1e-300")),
        code=(1, 2, 4),
        args=("--budget", "2"),
        timeout=12,
    ),
]

# --------------------------------------------------------------------------- #
# running the command
# --------------------------------------------------------------------------- #


def dp_check(*args: str | Path, cwd: Path, timeout: int = 150) -> subprocess.CompletedProcess:
    """``python -m privacy_audit dp-check ARGS --budget 30 --quiet`` (args may override)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "privacy_audit", "dp-check", *map(str, args)]
    if "--budget" not in cmd:
        cmd += ["--budget", "30"]
    return subprocess.run(
        [*cmd, "--quiet"], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def assert_refused(r: subprocess.CompletedProcess, words, out: Path | None) -> str:
    """Exit 2, one ``privacy-audit: error:`` line naming every word, nothing written."""
    shown = f"exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stdout + r.stderr, shown
    assert r.returncode == 2, shown
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, shown
    line = lines[0]
    assert line.startswith("privacy-audit: error:"), shown
    assert line.strip() != "privacy-audit: error:", shown
    for w in words:
        assert w in line, f"{w!r} not named in: {line}"
    assert r.stdout.strip() == "", shown
    if out is not None:
        assert not out.exists() or not any(out.iterdir()), sorted(out.iterdir())
    return line


def _param(case: Case):
    return pytest.param(case, id=case.id)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_hostile_input(case: Case, tmp_path: Path):
    """Exit 2 with one line naming the problem and nothing written; a case whose input is
    valid but extreme: one of the exit codes it allows, never 3, never a traceback."""
    setup = tmp_path / case.name
    if case.directory:
        setup.mkdir()
    elif case.raw is not None:
        setup.write_bytes(case.raw)
    elif case.source is not None:
        setup.write_text(case.source, encoding="utf-8")
    before = setup.read_bytes() if setup.is_file() else None
    out = tmp_path / "out"
    r = dp_check(setup, "--out", out, *case.args, cwd=tmp_path, timeout=case.timeout)
    if case.code == 2:
        assert_refused(r, case.words, out)
    else:
        shown = (
            f"exit {r.returncode}\n--- stdout\n{r.stdout[-2000:]}\n--- stderr\n{r.stderr[-2000:]}"
        )
        assert r.returncode in case.code, shown
        assert "Traceback" not in r.stdout + r.stderr, shown
    if before is not None:
        assert setup.read_bytes() == before  # the SETUP file is read, never written


def test_ids_are_unique_and_enough():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 40


# --------------------------------------------------------------------------- #
# --out
# --------------------------------------------------------------------------- #


def test_out_an_existing_regular_file_is_refused_and_kept(tmp_path: Path):
    setup = tmp_path / "setup.py"
    setup.write_text(opacus(), encoding="utf-8")
    out = tmp_path / "out"
    out.write_bytes(b"my notes\n")
    r = dp_check(setup, "--out", out, cwd=tmp_path)
    assert_refused(r, ("--out", str(out), "not a directory"), None)
    assert out.read_bytes() == b"my notes\n"


def test_out_the_setup_file_itself_is_refused_and_kept_byte_identical(tmp_path: Path):
    setup = tmp_path / "setup.py"
    setup.write_text(opacus(), encoding="utf-8")
    before = setup.read_bytes()
    r = dp_check(setup, "--out", setup, cwd=tmp_path)
    assert_refused(r, ("--out", "setup.py"), None)
    assert setup.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["setup.py"]


def test_out_whose_report_links_to_the_setup_file_is_refused(tmp_path: Path):
    setup = tmp_path / "setup.py"
    setup.write_text(opacus(), encoding="utf-8")
    before = setup.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(setup)
    r = dp_check(setup, "--out", out, cwd=tmp_path)
    assert_refused(r, ("--out", "report.html", "setup.py"), None)
    assert setup.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]


def test_out_beneath_a_regular_file_is_refused_before_any_check(tmp_path: Path):
    setup = tmp_path / "setup.py"
    setup.write_text(opacus(), encoding="utf-8")
    (tmp_path / "afile").write_bytes(b"x")
    r = dp_check(setup, "--out", tmp_path / "afile" / "out", cwd=tmp_path)
    assert_refused(r, ("--out", "afile"), None)
    assert (tmp_path / "afile").read_bytes() == b"x"


# --------------------------------------------------------------------------- #
# positive controls: the command runs, so the refusals above are the inputs' doing
# --------------------------------------------------------------------------- #


def _ran(r: subprocess.CompletedProcess, code: int, out: Path) -> None:
    shown = f"exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    assert r.returncode == code, shown
    assert "Traceback" not in r.stdout + r.stderr, shown
    assert (out / "report.html").is_file() and (out / "results.json").is_file(), shown
    assert (out / "report.html").stat().st_size > 0 and (out / "results.json").stat().st_size > 0


@pytest.mark.parametrize(
    ("fixture", "code"),
    [("opacus_default.py", 0), ("bug_clip_after_aggregation.py", 1)],
    ids=["opacus-default-consistent", "clip-after-aggregation-violated"],
)
def test_bundled_setups(fixture: str, code: int, tmp_path: Path):
    out = tmp_path / "out"
    r = dp_check(SETUPS / fixture, "--out", out, cwd=tmp_path)
    _ran(r, code, out)
    if code == 1:
        assert "VIOLATED" in r.stdout


@pytest.mark.parametrize(
    "source",
    [opacus(), privatize()],
    ids=["tiny-opacus-base", "tiny-privatize-base"],
)
def test_the_cases_base_setups_are_accepted(source: str, tmp_path: Path):
    """The setups every case above breaks in one place run, and are consistent."""
    setup = tmp_path / "setup.py"
    setup.write_text(source, encoding="utf-8")
    out = tmp_path / "out"
    _ran(dp_check(setup, "--out", out, cwd=tmp_path), 0, out)
