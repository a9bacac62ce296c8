"""Run issue 26's bad-input cases against one source tree and count the outcomes.

Not a test (pytest does not collect it): a before/after tool for the closing note.

    python tests/bad_inputs_outcomes.py --root /path/to/tree [--json out.json]

Every case runs ``python -m privacy_audit ...`` in a subprocess with ``PYTHONPATH=ROOT`` (so a
checkout of an older commit can be measured with this venv), under a timeout that marks a
hang. Each case names what must happen; an outcome is one of:

- ``ok``: the expected exit code (and the case's own check, e.g. a file left unchanged);
- ``traceback``: a Python traceback in the output;
- ``exit-3``: an internal error;
- ``hang``: still running at the timeout;
- ``fail-open``: exit 0 (or a pass) where a refusal or gate failure was due, or an input
  overwritten;
- ``wrong``: any other mismatch (e.g. a refusal where the input is fine, or a refusal
  whose line names something other than the flag typed and the real cause).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TRAIN_CFG = """\
seed = 0
[data]
members = "{members}"
nonmembers = "{nonmembers}"
{extra}
[target]
preset = "tiny"
max_length = 16
public_epochs = 0
[train]
epochs = 1
batch_size = 16
[[defenses]]
name = "none"
[attacks]
names = ["loss"]
[metrics]
bootstrap = {bootstrap}
"""


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _fixture_rows(n: int, start: int = 0) -> list[dict]:
    from privacy_audit import fixtures

    rows = fixtures.load_corpus("private")[start : start + n]
    return [{"id": r["id"], "text": r["text"], "label": r["label"]} for r in rows]


def _train_cfg(d: Path, members: list[dict], nonmembers: list[dict], **kw) -> Path:
    m = _jsonl(d / "members.jsonl", members)
    n = _jsonl(d / "nonmembers.jsonl", nonmembers)
    cfg = d / "audit.toml"
    cfg.write_text(
        TRAIN_CFG.format(
            members=m, nonmembers=n, extra=kw.get("extra", ""), bootstrap=kw.get("bootstrap", 100)
        ),
        encoding="utf-8",
    )
    return cfg


def _scores(path: Path, rows: list[tuple], header=("score", "member")) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _lm_dir(d: Path, vocab_shrink: int = 0, n_layer: int | None = None) -> Path:
    from own_models import build_causal_lm, save, word_tokenizer

    tok = word_tokenizer()
    model = build_causal_lm("gpt2", len(tok) - vocab_shrink)
    out = save(model, tok, d / "model")
    if n_layer is not None:
        conf = json.loads((out / "config.json").read_text())
        conf["n_layer"] = n_layer
        (out / "config.json").write_text(json.dumps(conf))
    return out


def _lm_texts(d: Path, same_name: bool = False) -> tuple[Path, Path]:
    """Member and non-member texts: ``a/texts.txt`` and ``b/texts.txt`` (same name in two
    folders) or ``members.txt`` and ``nonmembers.txt``."""
    from own_models import random_texts, write_lines

    if not same_name:
        return (
            write_lines(d / "members.txt", random_texts(30, 0)),
            write_lines(d / "nonmembers.txt", random_texts(30, 1)),
        )
    (d / "a").mkdir(exist_ok=True)
    (d / "b").mkdir(exist_ok=True)
    return (
        write_lines(d / "a" / "texts.txt", random_texts(30, 0)),
        write_lines(d / "b" / "texts.txt", random_texts(30, 1)),
    )


def _results_json(d: Path, runs: list[dict]) -> Path:
    p = d / "results.json"
    p.write_text(json.dumps({"schema_version": 1, "runs": runs}), encoding="utf-8")
    return p


def _attack(name: str, auc: float, status: str = "ok", lb: float | None = None) -> dict:
    m = {
        "auc": {"value": auc, "ci_low": auc - 0.05, "ci_high": auc + 0.05},
        "tpr_at_fpr_0.01": {"value": 0.02, "ci_low": 0.01, "ci_high": 0.04},
        "tpr_at_fpr_0.001": {"value": 0.002, "ci_low": 0.0, "ci_high": 0.01},
        "advantage": {"value": 0.1, "ci_low": 0.05, "ci_high": 0.15},
        "epsilon_lower_bound": {
            "value": 0.0 if lb is None else lb,
            "ci_low": None,
            "ci_high": None,
            "delta": 1e-5,
            "confidence": 0.95,
        },
    }
    return {
        "attack": name,
        "status": status,
        "n_members": 1000,
        "n_nonmembers": 1000,
        "metrics": m,
        "reason": None if status == "ok" else "surface failed",
    }


CLAIM = {"epsilon": 1.0, "delta": 1e-5, "unit": "example", "notion": "central-dp", "proven": True}


# --------------------------------------------------------------------------- #
# cases: name -> (group, setup(d) -> (argv list(s), expected code, extra check or None))
# --------------------------------------------------------------------------- #
def case_v2_inverted(d):
    import numpy as np

    rng = np.random.default_rng(0)
    rows = [(-(rng.normal() + 3), 1) for _ in range(300)] + [(-rng.normal(), 0) for _ in range(300)]
    src = _scores(d / "s.csv", rows)
    pre = ["score", str(src), "--out", str(d / "o"), "--bootstrap", "200"]
    return [pre, ["gate", str(d / "o" / "results.json"), "--max-auc", "0.6", "--strict"]], 1, None


def case_v3_label_column_text(d):
    cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24), extra='label_column = "text"')
    return [["run", str(cfg), "--out", str(d / "o"), "--quiet"]], 2, None


def case_v4_identical_files(d):
    rows = _fixture_rows(24)
    cfg = _train_cfg(d, rows, [{**r, "id": r["id"] + "-copy"} for r in rows])
    return [["run", str(cfg), "--out", str(d / "o"), "--quiet"]], 2, None


def case_v4_score_duplicate_texts(d):
    rows = [(0.1 * i, 1, f"text {i}") for i in range(10)] + [
        (0.1 * i, 0, f"text {i}") for i in range(10)
    ]
    src = _scores(d / "s.csv", rows, header=("score", "member", "text"))
    return [["score", str(src), "--out", str(d / "o"), "--bootstrap", "100"]], 2, None


def case_v4_same_name_txt(d):
    model = _lm_dir(d)
    a, b = _lm_texts(d, same_name=True)
    argv = ["run", "--model", str(model), "--members", str(a), "--nonmembers", str(b)]
    return [argv + ["--out", str(d / "o"), "--quiet"]], 0, None


def case_d1_summary_is_results(d):
    p = _results_json(d, [{"name": "r", "attacks": [_attack("loss", 0.55)]}])
    before = p.read_bytes()
    return (
        [["gate", str(p), "--max-auc", "0.9", "--summary", str(p)]],
        2,
        lambda: p.read_bytes() == before,
    )


def case_d1_junit_is_baseline(d):
    p = _results_json(d, [{"name": "r", "attacks": [_attack("loss", 0.55)]}])
    base = d / "base.json"
    shutil.copy(p, base)
    before = base.read_bytes()
    argv = ["gate", str(p), "--baseline", str(base), "--junit", str(base)]
    return [argv], 2, lambda: base.read_bytes() == before


def case_d2_resume_changed_data(d):
    cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24))
    out = d / "o"

    def change():
        f = d / "nonmembers.jsonl"
        f.write_text(f.read_text().replace('"text": "', '"text": "changed ', 1))

    def check():
        log = (out / "run" / "events.log").read_text().splitlines()
        return sum(" start " in ln for ln in log) == 2  # the trial ran again on the new data

    return (
        [
            ["run", str(cfg), "--out", str(out), "--quiet"],
            change,
            ["run", str(cfg), "--out", str(out), "--quiet", "--resume"],
        ],
        0,
        check,
    )


def case_d3_live_run_holds_out(d):
    cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24))
    out = d / "o"
    (out / "run" / "tasks").mkdir(parents=True)
    (out / "run" / "tasks" / "t.json").write_text("{}")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    stat = Path(f"/proc/{live.pid}/stat").read_text()
    start = stat[stat.rfind(")") + 2 :].split()[19]
    (out / ".privacy-audit.lock").write_text(f"{live.pid} {os.uname().nodename} {start}\n")
    _CLEANUP.append(live)
    return (
        [["run", str(cfg), "--out", str(out), "--quiet"]],
        2,
        lambda: (out / "run" / "tasks" / "t.json").is_file(),
    )


def case_x_n_layer_negative(d):
    model = _lm_dir(d, n_layer=-1)
    a, b = _lm_texts(d)
    return (
        [
            [
                "run",
                "--model",
                str(model),
                "--members",
                str(a),
                "--nonmembers",
                str(b),
                "--out",
                str(d / "o"),
                "--quiet",
            ]
        ],
        2,
        None,
    )


def case_x_vocab_larger_than_embedding(d):
    model = _lm_dir(d, vocab_shrink=20)
    a, b = _lm_texts(d)
    return (
        [
            [
                "run",
                "--model",
                str(model),
                "--members",
                str(a),
                "--nonmembers",
                str(b),
                "--out",
                str(d / "o"),
                "--quiet",
            ]
        ],
        2,
        None,
    )


def case_x_unwritable_run_dir(d):
    cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24))
    return (
        [["run", str(cfg), "--out", str(d / "o"), "--run-dir", "/proc/nope/run", "--quiet"]],
        2,
        None,
    )


def _damaged(payload):
    def case(d):
        cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24))
        out = d / "o"

        def damage():
            for f in (out / "run" / "tasks").glob("*.json"):
                f.write_text(json.dumps(payload))

        return (
            [
                ["run", str(cfg), "--out", str(out), "--quiet"],
                damage,
                ["run", str(cfg), "--out", str(out), "--quiet", "--resume"],
            ],
            2,
            None,
        )

    return case


def case_x_bootstrap_1e12(d):
    cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24), bootstrap=10**12)
    return [["run", str(cfg), "--out", str(d / "o"), "--quiet"]], 2, None


def case_hang_bootstrap_1e7(d):
    cfg = _train_cfg(d, _fixture_rows(24), _fixture_rows(24, 24), bootstrap=10**7)
    return [["run", str(cfg), "--out", str(d / "o"), "--quiet"]], 2, None


def _tok_dir(d: Path) -> Path:
    from own_models import word_tokenizer

    p = d / "tok"
    word_tokenizer().save_pretrained(p)
    return p


def case_x_canaries_temperature_nan(d):
    model = _lm_dir(d)
    return (
        [
            [
                "canaries",
                "make",
                "--design",
                "synthetic",
                "--n",
                "20",
                "--tokenizer",
                str(model),
                "--base-model",
                str(model),
                "--out",
                str(d / "c"),
                "--temperature",
                "nan",
            ]
        ],
        2,
        None,
    )


def case_x_canaries_data_not_utf8(d):
    bad = d / "bad.txt"
    bad.write_bytes(b"caf\xe9 au lait\n\xff\xfe broken\n")
    return (
        [
            [
                "canaries",
                "make",
                "--design",
                "bigram",
                "--n",
                "20",
                "--tokenizer",
                str(_tok_dir(d)),
                "--data",
                str(bad),
                "--out",
                str(d / "c"),
            ]
        ],
        2,
        None,
    )


def case_hang_canaries_n_1e12(d):
    return (
        [
            [
                "canaries",
                "make",
                "--design",
                "random-token",
                "--n",
                str(10**12),
                "--tokenizer",
                str(_tok_dir(d)),
                "--out",
                str(d / "c"),
            ]
        ],
        2,
        None,
    )


def case_g_weaker_attack_bound_violates_claim(d):
    run = {
        "name": "dp",
        "claim": CLAIM,
        "strongest_attack": "loss",
        "attacks": [_attack("loss", 0.70, lb=0.2), _attack("zlib", 0.60, lb=3.0)],
    }
    return [["gate", str(_results_json(d, [run])), "--max-auc", "0.9"]], 1, None


def case_g_errored_attack_is_unmeasured(d):
    run = {"name": "r", "attacks": [_attack("loss", 0.55), _attack("zlib", 0.99, status="error")]}
    return [["gate", str(_results_json(d, [run])), "--max-auc", "0.9"]], 1, None


def case_g_status_case_insensitive(d):
    run = {"name": "r", "attacks": [_attack("loss", 0.55), _attack("zlib", 0.95, status="OK")]}
    return [["gate", str(_results_json(d, [run])), "--max-auc", "0.9"]], 1, None


def case_g_score_duplicate_column(d):
    rows = [(0.1 * i, int(i < 10), 0.5) for i in range(20)]
    src = _scores(d / "s.csv", rows, header=("score", "member", "score"))
    return [["score", str(src), "--out", str(d / "o"), "--bootstrap", "100"]], 2, None


# --------------------------------------------------------------------------- #
# issue 35: stale inputs, outputs over inputs, references, the lock, CSV, messages
# --------------------------------------------------------------------------- #
def _says(*needles):
    """A check on the refusal's line: a refusal naming something else is ``wrong``."""

    def check(output: str):
        return all(n in output for n in needles) or "wrong"

    return check


def _events_starts(run_dir: Path) -> int:
    log = run_dir / "events.log"
    return log.read_text(encoding="utf-8").count(" start ") if log.exists() else 0


def _same_shape_weights(model_dir: Path, seed: int) -> None:
    from own_models import build_causal_lm, word_tokenizer

    tok = word_tokenizer()
    build_causal_lm("gpt2", len(tok), seed=seed, d=32).save_pretrained(model_dir)


def _small_lm(d: Path, name: str, seed: int = 0, words=None) -> Path:
    from own_models import build_causal_lm, save, word_tokenizer

    tok = word_tokenizer(words) if words is not None else word_tokenizer()
    return save(build_causal_lm("gpt2", len(tok), seed=seed, d=32), tok, d / name)


def case_s_model_dir_weights_swapped(d):
    model = _small_lm(d, "lm")
    cfg = d / "audit.toml"
    cfg.write_text(
        "seed = 0\n[data]\nn_members = 16\nn_nonmembers = 16\nn_test = 8\n"
        f'[target]\nmodel_dir = "{model}"\nmax_length = 16\n'
        "[train]\nepochs = 1\nbatch_size = 8\n"
        '[[defenses]]\nname = "none"\n[attacks]\nnames = ["loss"]\n[metrics]\nbootstrap = 100\n',
        encoding="utf-8",
    )
    out = d / "o"
    return (
        [
            ["run", str(cfg), "--out", str(out), "--quiet"],
            lambda: _same_shape_weights(model, 7),
            ["run", str(cfg), "--out", str(out), "--quiet", "--resume"],
        ],
        0,
        lambda: _events_starts(out / "run") == 2,  # the trial ran again on the new weights
    )


def _shadow_setup(d, base: Path, population: Path | None = None) -> Path:
    from own_models import random_texts, write_lines

    target = _small_lm(d, "target")
    m = write_lines(d / "members.txt", random_texts(16, 0, length=8))
    n = write_lines(d / "nonmembers.txt", random_texts(16, 1, length=8))
    pop = population or write_lines(d / "population.txt", random_texts(8, 2, length=8))
    cfg = d / "audit.toml"
    cfg.write_text(
        f'[target]\naudit_dir = "{target}"\n'
        f'[shadow]\nn_models = 2\nbase_dir = "{base}"\npopulation = "{pop}"\nepochs = 1\n'
        f'[data]\nmembers = "{m}"\nnonmembers = "{n}"\n'
        '[attacks]\nnames = ["lm-loss"]\n[metrics]\nbootstrap = 100\n',
        encoding="utf-8",
    )
    return cfg


def case_s_shadow_base_weights_swapped(d):
    base = _small_lm(d, "base", seed=1)
    cfg = _shadow_setup(d, base)
    out = d / "o"
    return (
        [
            ["run", str(cfg), "--out", str(out), "--quiet"],
            lambda: _same_shape_weights(base, 8),
            ["run", str(cfg), "--out", str(out), "--quiet", "--resume"],
        ],
        0,
        lambda: _events_starts(out / "run") == 4,  # both references trained again
    )


def case_s_shadow_base_other_tokenizer(d):
    from own_models import WORDS

    base = _small_lm(d, "base", seed=1, words=WORDS[:60])
    cfg = _shadow_setup(d, base)
    return [["run", str(cfg), "--out", str(d / "o"), "--quiet"]], 2, _says("shadow.base_dir")


def case_s_population_is_members(d):
    base = _small_lm(d, "base", seed=1)
    cfg = _shadow_setup(d, base, population=d / "members.txt")
    return [["run", str(cfg), "--out", str(d / "o"), "--quiet"]], 2, _says("shadow.population")


def _one_liner(d, *extra) -> list[str]:
    model = _small_lm(d, "model") if not (d / "model").exists() else d / "model"
    a, b = _lm_texts(d)
    return ["run", "--model", str(model), "--members", str(a), "--nonmembers", str(b), *extra]


def case_s_reference_twice_via_symlink(d):
    base = _small_lm(d, "base", seed=1)
    (d / "link").symlink_to(base)
    argv = _one_liner(d, "--reference", str(base), "--reference", str(d / "link"))
    return [argv + ["--out", str(d / "o"), "--quiet"]], 2, None


def case_s_reference_is_the_target(d):
    argv = _one_liner(d)
    argv += ["--reference", str(d / "model"), "--out", str(d / "o"), "--quiet"]
    return [argv], 2, None


def _scored(d) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    rows = [(rng.normal() + (i < 100), int(i < 100)) for i in range(200)]
    return _scores(d / "s.csv", rows)


def _risky(d, out_name: str):
    """An LM audit (its results hold a leakage ranking), then export-risky writing over
    one of that run's files."""
    out = d / "o"
    target = out / out_name
    state = {}
    return (
        [
            _one_liner(d, "--out", str(out), "--quiet"),
            lambda: state.update(before=target.read_bytes()),
            ["export-risky", str(out / "results.json"), "--top", "3", "--out", str(target)],
        ],
        2,
        lambda: target.read_bytes() == state["before"],
    )


def case_s_export_risky_out_is_results(d):
    return _risky(d, "results.json")


def case_s_export_risky_out_is_report(d):
    return _risky(d, "report.html")


def case_s_score_input_is_out_report(d):
    out = d / "o"
    out.mkdir()
    src = out / "report.html"  # the scores CSV, kept where the report goes
    src.write_bytes(_scored(d).read_bytes())
    before = src.read_bytes()
    argv = ["score", str(src), "--out", str(out), "--bootstrap", "100"]
    return [argv], 2, lambda: src.read_bytes() == before


def case_s_dataset_inference_suspect_is_out_results(d):
    from own_models import random_texts

    model = _small_lm(d, "model")
    _, b = _lm_texts(d)
    out = d / "o"
    out.mkdir()
    suspect = out / "results.json"  # JSON lines of suspect texts, where results.json goes
    _jsonl(suspect, [{"text": t} for t in random_texts(30, 0)])
    before = suspect.read_bytes()
    argv = ["dataset-inference", "--model", str(model), "--suspect", str(suspect)]
    argv += ["--validation", str(b), "--out", str(out), "--quiet"]
    return [argv], 2, lambda: suspect.read_bytes() == before


def case_s_lock_race_stale_lock(d):
    def check(_output=""):
        p = subprocess.run(
            [sys.executable, str(HERE / "lock_stress.py"), "--trials", "40", "--procs", "16"],
            env={**os.environ, "PYTHONPATH": f"{_ROOT[0]}{os.pathsep}{HERE}"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        return "'double_trials': 0," in p.stdout

    return [["--version"]], 0, check


def case_s_score_6mb_field(d):
    from own_models import random_texts

    words = random_texts(400, 5, length=12)
    long = " ".join(words) * 1200  # one ~6 MB field
    rows = [(0.5, 1, long)] + [
        (0.1 * (i % 7), i % 2, f"{w} {i}") for i, w in enumerate(words[:199])
    ]
    src = _scores(d / "s.csv", rows, header=("score", "member", "text"))
    return [["score", str(src), "--out", str(d / "o"), "--bootstrap", "100"]], 0, None


def case_s_members_dev_null(d):
    argv = _one_liner(d)
    argv[argv.index("--members") + 1] = "/dev/null"
    return [argv + ["--out", str(d / "o"), "--quiet"]], 2, _says("--members", "character device")


def case_s_members_fifo(d):
    argv = _one_liner(d)
    fifo = d / "fifo"
    os.mkfifo(fifo)
    argv[argv.index("--members") + 1] = str(fifo)
    return [argv + ["--out", str(d / "o"), "--quiet"]], 2, _says("--members", "FIFO")


def case_s_di_seed_negative(d):
    model = _small_lm(d, "model")
    a, b = _lm_texts(d)
    argv = ["dataset-inference", "--model", str(model), "--suspect", str(a)]
    argv += ["--validation", str(b), "--seed", "-1", "--out", str(d / "o")]
    return [argv], 2, _says("--seed")


def case_s_empty_text_column(d):
    argv = _one_liner(d)
    empty = d / "empty.csv"
    empty.write_text("text\n" + '""\n' * 30, encoding="utf-8")
    argv[argv.index("--members") + 1] = str(empty)
    return [argv + ["--out", str(d / "o"), "--quiet"]], 2, _says("--members", "'text'", "empty")


def case_s_score_empty_text_column(d):
    rows = [(0.1 * i, i % 2, "") for i in range(40)]
    src = _scores(d / "s.csv", rows, header=("score", "member", "text"))
    argv = ["score", str(src), "--out", str(d / "o"), "--bootstrap", "100"]
    return [argv], 2, _says("'text'", "empty")


def case_s_queries_huge(d):
    argv = _one_liner(d, "--queries", "1" + "0" * 41)
    return [argv + ["--out", str(d / "o"), "--quiet"]], 2, _says("--queries")


_ROOT: list[Path] = []
CASES = {
    "V2 inverted scores: gate --strict": ("verdict", case_v2_inverted),
    "V3 label_column = text": ("verdict", case_v3_label_column_text),
    "V4 identical member/non-member texts": ("verdict", case_v4_identical_files),
    "V4 score: every non-member text a member's": ("verdict", case_v4_score_duplicate_texts),
    "V4 same-named .txt in two folders": ("verdict", case_v4_same_name_txt),
    "D1 gate --summary = results": ("data-loss", case_d1_summary_is_results),
    "D1 gate --junit = baseline": ("data-loss", case_d1_junit_is_baseline),
    "D2 resume after a data file changed": ("data-loss", case_d2_resume_changed_data),
    "D3 second run into a live run's --out": ("data-loss", case_d3_live_run_holds_out),
    "n_layer = -1 in config.json": ("exit-3", case_x_n_layer_negative),
    "tokenizer larger than the embedding": ("exit-3", case_x_vocab_larger_than_embedding),
    "unwritable --run-dir": ("exit-3", case_x_unwritable_run_dir),
    'resumed task {"run": {}}': ("exit-3", _damaged({"run": {}})),
    'resumed task {"run": {"name": "x"}}': ("exit-3", _damaged({"run": {"name": "x"}})),
    "resumed task with an attack {}": ("exit-3", _damaged({"run": {"name": "x", "attacks": [{}]}})),
    "resumed task with an ok attack, no metrics": (
        "exit-3",
        _damaged({"run": {"name": "x", "attacks": [{"attack": "loss", "status": "ok"}]}}),
    ),
    "[metrics] bootstrap = 10^12": ("exit-3", case_x_bootstrap_1e12),
    "canaries make --temperature nan": ("exit-3", case_x_canaries_temperature_nan),
    "canaries make --data non-UTF-8": ("exit-3", case_x_canaries_data_not_utf8),
    "canaries make --n 10^12": ("hang", case_hang_canaries_n_1e12),
    "[metrics] bootstrap = 10^7": ("hang", case_hang_bootstrap_1e7),
    "gate: a weaker attack's ε bound above the claim": (
        "gate",
        case_g_weaker_attack_bound_violates_claim,
    ),
    "gate: an errored attack beside a measured one": ("gate", case_g_errored_attack_is_unmeasured),
    'gate: status "OK"': ("gate", case_g_status_case_insensitive),
    "score: a duplicate column name": ("gate", case_g_score_duplicate_column),
    "S1 resume: model_dir weights swapped (same shapes)": (
        "stale",
        case_s_model_dir_weights_swapped,
    ),
    "S1 resume: shadow base_dir weights swapped": ("stale", case_s_shadow_base_weights_swapped),
    "S2 shadow base_dir with another tokenizer": ("reference", case_s_shadow_base_other_tokenizer),
    "S2 --reference twice, via a symlink": ("reference", case_s_reference_twice_via_symlink),
    "S2 --reference = the audited model": ("reference", case_s_reference_is_the_target),
    "S2 shadow population = the members file": ("reference", case_s_population_is_members),
    "S3 export-risky --out = its results.json": ("data-loss", case_s_export_risky_out_is_results),
    "S3 export-risky --out = the run's report": ("data-loss", case_s_export_risky_out_is_report),
    "S3 score: the scores file is --out's report.html": (
        "data-loss",
        case_s_score_input_is_out_report,
    ),
    "S3 dataset-inference: --suspect is --out's results.json": (
        "data-loss",
        case_s_dataset_inference_suspect_is_out_results,
    ),
    "S4 lock: 16 processes x 40 trials, stale lock": ("data-loss", case_s_lock_race_stale_lock),
    "S5 score: a 6 MB text field": ("wrong", case_s_score_6mb_field),
    "S6 --members /dev/null": ("message", case_s_members_dev_null),
    "S6 --members a FIFO": ("message", case_s_members_fifo),
    "S6 dataset-inference --seed -1": ("message", case_s_di_seed_negative),
    "S6 --members: text column all empty": ("message", case_s_empty_text_column),
    "S6 score: text column all empty": ("message", case_s_score_empty_text_column),
    "S6 --queries 10^41": ("message", case_s_queries_huge),
}
_CLEANUP: list[subprocess.Popen] = []


def run_case(root: Path, setup, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="bad-input-") as tmp:
        d = Path(tmp)
        steps, expected, check = setup(d)
        code, output, t0 = None, "", time.monotonic()
        try:
            for step in steps:
                if callable(step):
                    step()
                    continue
                left = timeout  # per command: a case may run the CLI twice
                try:
                    p = subprocess.run(
                        [sys.executable, "-m", "privacy_audit", *step],
                        env=env,
                        cwd=d,
                        capture_output=True,
                        text=True,
                        timeout=max(left, 1),
                    )
                except subprocess.TimeoutExpired:
                    return {
                        "outcome": "hang",
                        "code": None,
                        "seconds": round(time.monotonic() - t0, 1),
                    }
                code, output = p.returncode, p.stdout + p.stderr
                if code not in (0, 1) and step is not steps[-1]:
                    break
            ok_check = True
            if check is not None and code is not None:
                import inspect

                ok_check = check(output) if inspect.signature(check).parameters else check()
        finally:
            while _CLEANUP:
                proc = _CLEANUP.pop()
                proc.kill()
                proc.wait()
    seconds = round(time.monotonic() - t0, 1)
    if "Traceback" in output:
        outcome = "traceback"
    elif code == 3:
        outcome = "exit-3"
    elif ok_check == "wrong" and code == expected:  # refused, naming the wrong thing
        outcome = "wrong"
    elif not ok_check or ok_check == "wrong":  # an input overwritten or stale results reused
        outcome = "fail-open" if ok_check is False or code == 0 else "wrong"
    elif code == expected:
        outcome = "ok"
    elif expected != 0 and code == 0:
        outcome = "fail-open"
    else:
        outcome = "wrong"
    last = [ln for ln in output.strip().splitlines() if ln.strip()]
    return {
        "outcome": outcome,
        "code": code,
        "expected": expected,
        "seconds": seconds,
        "last_line": last[-1][:300] if last else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="source tree to run (PYTHONPATH)")
    ap.add_argument("--timeout", type=float, default=180, help="seconds before a case is a hang")
    ap.add_argument("--json", help="write the per-case outcomes here")
    ap.add_argument(
        "--only", help="run only cases whose name contains one of these (separated by |)"
    )
    args = ap.parse_args()
    rows = {}
    _ROOT.append(Path(args.root).resolve())
    for name, (group, setup) in CASES.items():
        if args.only and not any(part in name for part in args.only.split("|")):
            continue
        res = run_case(Path(args.root).resolve(), setup, args.timeout)
        rows[name] = {"group": group, **res}
        print(
            f"{res['outcome']:<10} {str(res['code']):>4} {res['seconds']:7.1f}s  {name}  | "
            f"{res.get('last_line', '')[:140]}",
            flush=True,
        )
    counts = Counter(r["outcome"] for r in rows.values())
    print(f"\n{len(rows)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"root": args.root, "cases": rows, "counts": dict(counts)}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
