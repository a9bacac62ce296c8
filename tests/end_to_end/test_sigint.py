"""^C during the long subcommands, as a user presses it: SIGINT to a real
``python -m privacy_audit`` process once it has started its work (its first progress
line), then: exit code 130, one line on stderr after the interrupt, no traceback, and no
output folder left behind (the command created it; nothing in it could be reused).

A command that finishes before the interrupt fails the test (its workload is then too
small to be interrupted), so a pass always means an interrupt was handled. (A ``run``
interrupted after it cached scores under ``OUT/run`` keeps that folder on purpose:
``--resume`` reuses it; it never holds a report or results.json.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines

ROOT = Path(__file__).resolve().parents[2]
INTERRUPTED = "privacy-audit: interrupted; no partial report was written"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny saved GPT-2 and 3,000 + 3,000 texts of 40 words (enough work that each
    command runs for several seconds after its first progress line), and 20,000
    canaries made for it."""
    from privacy_audit.audit.cli import main

    d = tmp_path_factory.mktemp("sigint")
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), d=32), tok, d / "model")
    write_lines(d / "a.txt", random_texts(3000, 0, length=40))
    write_lines(d / "b.txt", random_texts(3000, 1, length=40))
    argv = ["canaries", "make", "--design", "random-token", "--n", "20000"]
    assert main([*argv, "--tokenizer", str(d / "model"), "--out", str(d / "canaries")]) == 0
    return d


def _interrupt(argv: list[str], marker: str, cwd: Path, after: float = 1.0):
    """Run the command, send SIGINT ``after`` seconds after ``marker`` shows on stderr;
    returns (exit code, stderr lines before the interrupt, stderr lines after, stdout)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    stdout = open(cwd / "stdout.txt", "w+", encoding="utf-8")  # noqa: SIM115 - closed below
    p = subprocess.Popen(
        [sys.executable, "-m", "privacy_audit", *argv],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    seen = threading.Event()

    def read():
        for line in p.stderr:
            lines.append(line.rstrip("\n"))
            if marker in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(300), f"no {marker!r} on stderr: {lines[-5:]}"
        time.sleep(after)
        assert p.poll() is None, f"finished before the interrupt (rc {p.returncode})"
        cut = len(lines)
        p.send_signal(signal.SIGINT)
        p.wait(120)
    finally:
        if p.poll() is None:
            p.kill()
        reader.join(10)
        stdout.seek(0)
        out = stdout.read()
        stdout.close()
    return p.returncode, lines[:cut], lines[cut:], out


def _assert_clean_interrupt(rc, after, stdout, out_dir: Path):
    text = "\n".join(after)
    assert rc == 130, (rc, text[-2000:])
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-2000:]
    # progress bars may still flush a fragment; the only message is the one line
    said = [ln for ln in after if ln.strip() and not ln.lstrip().startswith(("[", "\r"))]
    assert said == [INTERRUPTED], after
    assert "VERDICT" not in stdout and "report:" not in stdout, stdout
    assert not out_dir.exists(), sorted(p.name for p in out_dir.rglob("*"))


def test_run_on_a_saved_model(inputs, tmp_path):
    d, out = inputs, tmp_path / "out"
    argv = ["run", "--model", str(d / "model"), "--members", str(d / "a.txt")]
    argv += ["--nonmembers", str(d / "b.txt"), "--out", str(out)]
    rc, _, after, stdout = _interrupt(argv, "stage: load", tmp_path, after=0.3)
    _assert_clean_interrupt(rc, after, stdout, out)


def test_dataset_inference(inputs, tmp_path):
    d, out = inputs, tmp_path / "out"
    argv = ["dataset-inference", "--model", str(d / "model"), "--suspect", str(d / "a.txt")]
    argv += ["--validation", str(d / "b.txt"), "--out", str(out)]
    rc, _, after, stdout = _interrupt(argv, "dataset inference:", tmp_path)
    _assert_clean_interrupt(rc, after, stdout, out)


def test_canaries_audit(inputs, tmp_path):
    d, out = inputs, tmp_path / "out"
    argv = ["canaries", "audit", "--model", str(d / "model"), "--canaries", str(d / "canaries")]
    argv += ["--out", str(out)]
    rc, _, after, stdout = _interrupt(argv, "scoring 20000 canaries", tmp_path, after=0.3)
    _assert_clean_interrupt(rc, after, stdout, out)


def test_dp_check(tmp_path):
    out = tmp_path / "out"
    setup = ROOT / "fixtures" / "dp_setups" / "opacus_default.py"
    argv = ["dp-check", str(setup), "--out", str(out)]
    rc, _, after, stdout = _interrupt(argv, "dp-check: noise", tmp_path)
    _assert_clean_interrupt(rc, after, stdout, out)
