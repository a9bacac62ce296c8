"""One rule for outputs (issue 35, item 2): no command writes over one of its inputs.

``test_every_writer_calls_the_shared_helper`` enumerates the command line's (sub)commands:
every one with an output option must be listed in ``REACH`` with arguments that reach
:func:`privacy_audit.audit.outputs.check_outputs`, and must call it (a spy stops it there).
A new command that writes and skips the helper fails this test. The other tests make real
collisions (same path, symlink, hard link, a run's report beside its results) and check
exit 2, one line, and the input's bytes unchanged.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from privacy_audit.audit import outputs
from privacy_audit.audit.cli import build_parser
from privacy_audit.ground.errors import AuditError
from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines

#: options through which a command writes files
OUTPUT_DESTS = {"out", "json", "markdown", "junit", "summary", "run_dir", "checkpoint_dir"}
SPY = "output-helper-was-called"


def _commands(parser: argparse.ArgumentParser, prefix=()):
    """``(command path, subparser)`` of every leaf command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, p in subs[0].choices.items():
        yield from _commands(p, (*prefix, name))


def _writes(p: argparse.ArgumentParser) -> bool:
    return any(a.dest in OUTPUT_DESTS for a in p._actions)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs")
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), d=32), tok, d / "model")
    write_lines(d / "a.txt", random_texts(30, 0))
    write_lines(d / "b.txt", random_texts(30, 1))
    (d / "audit.toml").write_text(
        '[data]\ncorpus = "fixtures"\nn_members = 20\nn_nonmembers = 20\nn_test = 20\n'
        '[target]\npreset = "tiny"\n[[defenses]]\nname = "none"\n',
        encoding="utf-8",
    )
    rng = np.random.default_rng(0)
    with open(d / "s.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["score", "member"])
        for i in range(200):
            w.writerow([rng.normal() + (i < 100), int(i < 100)])
    (d / "canaries").mkdir()
    return d


def REACH(d: Path, o: Path) -> dict[tuple[str, ...], list[str]]:
    """Arguments with which each writer reaches the helper (``o``: a fresh folder)."""
    m, a, b, cfg = str(d / "model"), str(d / "a.txt"), str(d / "b.txt"), str(d / "audit.toml")
    r = str(d / "r" / "results.json")
    return {
        ("run",): ["run", cfg, "--out", str(o)],
        ("epsilon",): ["epsilon", cfg, "--out", str(o)],
        ("score",): ["score", str(d / "s.csv"), "--out", str(o)],
        ("gate",): ["gate", r, "--max-auc", "0.9", "--summary", str(o / "s.json")],
        ("export-risky",): ["export-risky", r, "--top", "1", "--out", str(o / "ids.txt")],
        ("bench",): ["bench", "metrics", "--out", str(o / "b.json")],
        ("compare",): ["compare", r, r, "--out", str(o)],
        ("experiment",): ["experiment", "dp-blogs-lr-grid", "--out", str(o / "e.json")],
        ("claims",): ["claims", "--json", str(o / "c.json")],
        ("dataset-inference",): [
            "dataset-inference",
            *("--model", m, "--suspect", a, "--validation", b, "--out", str(o)),
        ],
        ("canaries", "make"): [
            "canaries",
            *("make", "--design", "random-token", "--n", "20", "--tokenizer", m),
            *("--out", str(o)),
        ],
        ("canaries", "audit"): [
            "canaries",
            *("audit", "--model", m, "--canaries", str(d / "canaries"), "--out", str(o)),
        ],
        ("dp-check",): ["dp-check", str(d / "a.txt"), "--out", str(o)],
    }


def test_every_writer_calls_the_shared_helper(files, tmp_path, cli, monkeypatch):
    from experiments.run import EXPERIMENTS

    calls: list[list] = []

    def spy(outs, inputs=(), output_dirs=()):
        calls.append([str(p) for _, p in outs if p is not None])
        raise AuditError(SPY)

    monkeypatch.setattr(outputs, "check_outputs", spy)
    reach = REACH(files, tmp_path / "o")
    writers = [path for path, p in _commands(build_parser()) if _writes(p)]
    missing = [" ".join(w) for w in writers if w not in reach]
    assert not missing, f"new writer command(s) {missing}: call check_outputs, list them here"
    assert len(writers) >= 12
    for path in writers:
        argv = list(reach[path])
        if path == ("experiment",):
            argv[1] = next(iter(EXPERIMENTS))
        calls.clear()
        r = cli(argv)
        assert r.code == 2 and SPY in r.stderr, (path, r.code, r.stderr[-500:])
        assert calls and any(str(tmp_path / "o") in c for c in calls[0]), (path, calls)
    assert not (tmp_path / "o").exists()  # stopped before writing anything


def _refused(r, *needles):
    assert r.code == 2, (r.code, r.stdout, r.stderr[-1500:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "overwrite an input" in lines[0], r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture
def run_dir(tmp_path, cli, files):
    out = tmp_path / "scored"
    assert cli(["score", str(files / "s.csv"), "--out", str(out), "--bootstrap", "100"]).code == 0
    return out


def _links(target: Path, where: Path) -> list[Path]:
    """The same file by another spelling, a symlink and a hard link."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "sym").symlink_to(target)
    os.link(target, where / "hard")
    return [target.parent / ".." / target.parent.name / target.name, where / "sym", where / "hard"]


def test_export_risky_and_gate_refuse_their_input_and_its_run_outputs(run_dir, tmp_path, cli):
    res = run_dir / "results.json"
    keep = {p: p.read_bytes() for p in run_dir.iterdir()}
    for out in [res, *_links(res, tmp_path / "l"), run_dir / "report.html"]:
        _refused(cli(["export-risky", str(res), "--top", "3", "--out", str(out)]), "--out")
        _refused(cli(["gate", str(res), "--max-auc", "0.99", "--junit", str(out)]), "--junit")
    assert {p: p.read_bytes() for p in run_dir.iterdir()} == keep
    r = cli(["gate", str(res), "--max-auc", "0.99", "--junit", "j.xml", "--summary", "j.xml"])
    assert r.code == 2 and "name the same file" in r.stderr


def test_score_dataset_inference_and_run_refuse_an_output_that_is_an_input(files, tmp_path, cli):
    src = tmp_path / "s.csv"
    src.write_bytes((files / "s.csv").read_bytes())
    before = src.read_bytes()
    for i, link in enumerate(_links(src, tmp_path / "l")[1:]):
        out = tmp_path / f"o{i}"
        out.mkdir()
        (out / "results.json").symlink_to(link) if i == 0 else os.link(src, out / "results.json")
        _refused(cli(["score", str(src), "--out", str(out)]), "--out file", "the scores file")
    assert src.read_bytes() == before
    # dataset-inference: --suspect is the report the run would write (hard link)
    out = tmp_path / "di"
    out.mkdir()
    suspect = tmp_path / "suspect.txt"
    suspect.write_bytes((files / "a.txt").read_bytes())
    os.link(suspect, out / "report.html")
    argv = ["dataset-inference", "--model", str(files / "model"), "--suspect", str(suspect)]
    argv += ["--validation", str(files / "b.txt"), "--out", str(out), "--quiet"]
    _refused(cli(argv), "--suspect")
    # run --model ...: --members is the results.json of --out
    out = tmp_path / "run"
    out.mkdir()
    members = out / "results.json"
    members.write_bytes((files / "a.txt").read_bytes())
    argv = ["run", "--model", str(files / "model"), "--members", str(members)]
    argv += ["--nonmembers", str(files / "b.txt"), "--out", str(out), "--quiet"]
    _refused(cli(argv), "--members")
    assert members.read_bytes() == (files / "a.txt").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]


def test_compare_claims_canaries_and_experiment_refuse_too(run_dir, files, tmp_path, cli):
    res = run_dir / "results.json"
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.json").symlink_to(res)
    _refused(cli(["compare", str(run_dir), str(run_dir), "--out", str(out)]), "compare.json")
    # claims: --markdown over a recorded result it reads
    from experiments.claims import default_docs, recorded_inputs

    (what, rec), *_ = recorded_inputs(default_docs())
    docs = tmp_path / "docs"
    copy = docs / rec.relative_to(default_docs())
    copy.parent.mkdir(parents=True)
    copy.write_bytes(rec.read_bytes())
    r = cli(["claims", "--docs", str(docs), "--markdown", str(copy)])
    _refused(r, "--markdown")
    assert copy.read_bytes() == rec.read_bytes()
    # canaries make: --out/tokenizer would be rewritten, and it is the --tokenizer
    out = tmp_path / "can"
    (out / "tokenizer").mkdir(parents=True)
    tok = out / "tokenizer"
    word_tokenizer().save_pretrained(tok)
    argv = ["canaries", "make", "--design", "random-token", "--n", "20"]
    _refused(cli([*argv, "--tokenizer", str(tok), "--out", str(out), "--force"]), "--tokenizer")
    # experiment: --out is a finished cell of --checkpoint-dir
    from experiments.run import EXPERIMENTS

    name = next(iter(EXPERIMENTS))
    ck = tmp_path / "ck"
    (ck / name).mkdir(parents=True)
    cell = ck / name / "c.json"
    cell.write_text("{}")
    r = cli(["experiment", name, "--out", str(cell), "--checkpoint-dir", str(ck)])
    _refused(r, "--checkpoint-dir")
    assert cell.read_text() == "{}"


def test_the_helper_accepts_distinct_paths(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps({}))
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    outputs.check_outputs(
        [("--out", tmp_path / "o" / "results.json"), ("--junit", tmp_path / "j.xml")],
        [("the results file", a), ("--model", model)],
        [("--out", tmp_path / "o2")],
    )
    # a new file inside an input directory overwrites nothing
    outputs.check_outputs([("--out", model / "report.html")], [("--model", model)])


def test_compare_checks_its_output_before_reading_any_run(tmp_path, cli, monkeypatch):
    """An unwritable --out is refused before the runs are read and rendered (it was
    checked after seconds of work)."""
    import privacy_audit.audit.commands.compare as cc

    def no_read(path):  # pragma: no cover - reaching it is the failure
        raise AssertionError("read a run before checking --out")

    monkeypatch.setattr(cc, "load_for_compare", no_read)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}", encoding="utf-8")
    b.write_text("{}", encoding="utf-8")
    blocker = tmp_path / "blocker"
    blocker.write_text("x", encoding="utf-8")
    out = cli(["compare", str(a), str(b), "--out", str(blocker / "sub")])
    assert out.code == 2, out.stdout + out.stderr
    assert "cannot write to output directory" in out.stderr


def _model_dir(tmp_path):
    model = tmp_path / "model"
    (model / "tokenizer").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "tokenizer" / "vocab.txt").write_text("a b")
    return model


def test_an_output_that_is_the_input_folder_itself_is_refused(tmp_path):
    model = _model_dir(tmp_path)
    with pytest.raises(AuditError, match="overwrite an input"):
        outputs.check_outputs([("--out", model)], [("--model", model)])


def test_a_hard_link_of_a_file_inside_an_input_folder_is_refused(tmp_path):
    model = _model_dir(tmp_path)
    link = tmp_path / "elsewhere" / "report.html"  # outside the folder, by path
    link.parent.mkdir()
    os.link(model / "tokenizer" / "vocab.txt", link)
    with pytest.raises(AuditError, match="overwrite an input") as e:
        outputs.check_outputs([("--out", link)], [("--model", model)])
    assert str(model / "tokenizer" / "vocab.txt") in str(e.value)
    # a new file beside it is fine
    outputs.check_outputs([("--out", link.with_name("new.html"))], [("--model", model)])


def test_an_output_folder_that_holds_an_input_is_refused(tmp_path):
    model = _model_dir(tmp_path)
    out = tmp_path / "out"
    (out / "tokenizer").mkdir(parents=True)
    (out / "tokenizer" / "merges.txt").write_text("x")
    for what, inp in (
        ("--tokenizer", out / "tokenizer"),  # a folder below it
        ("--merges", out / "tokenizer" / "merges.txt"),  # a file two levels down
        ("--model", out),  # the input folder itself
    ):
        with pytest.raises(AuditError, match="holds"):
            outputs.check_outputs([], [(what, inp)], [("--out", out)])
    with pytest.raises(AuditError, match="holds"):
        outputs.check_outputs([], [("--model", model)], [("--out", model)])
    outputs.check_outputs([], [("--model", model)], [("--out", tmp_path / "o2")])


def test_a_runs_log_beside_its_results_is_an_input(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("results.json", "report.html", "run.log"):
        (run / name).write_text("x")
    family = outputs.results_family(run / "results.json")
    assert sorted((w, p.name) for w, p in family) == [
        ("that run's report.html", "report.html"),
        ("that run's run.log", "run.log"),
        ("the results file", "results.json"),
    ]
    with pytest.raises(AuditError, match="that run's run.log"):
        outputs.check_outputs([("--out", run / "run.log")], family)


def test_two_outputs_that_are_one_file_by_a_hard_link_are_refused(tmp_path):
    a = tmp_path / "a.html"
    a.write_text("x")
    b = tmp_path / "b.html"
    os.link(a, b)  # different paths, one inode
    with pytest.raises(AuditError, match="name the same file"):
        outputs.check_outputs([("--out", a), ("--report", b)])
    outputs.check_outputs([("--out", a), ("--report", tmp_path / "c.html")])


def test_a_missing_sibling_of_results_json_is_not_an_input(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text("{}")
    family = outputs.results_family(run / "results.json")
    assert [(w, p.name) for w, p in family] == [("the results file", "results.json")]
    # writing a report beside the results (none there yet) is allowed
    outputs.check_outputs([("--out", run / "report.html")], family)
