"""`run` in a CI log (stderr not a terminal): one progress line per epoch and per task
with elapsed time and ETA, one VERDICT line per run on stdout, no raw ANSI or warnings;
`--quiet` keeps only the verdict lines (issue 17). Reads the shared tiny run."""

from __future__ import annotations

import json
import re


def test_progress_lines_per_epoch_and_task_with_eta(tiny_run):
    _, outcome = tiny_run
    assert outcome.code == 0, outcome.stderr[-2000:]
    err = outcome.stderr.splitlines()
    epochs = [line for line in err if re.search(r": epoch 1/1 \(100%\) elapsed \d+:\d\d ETA", line)]
    assert len(epochs) >= 2, err  # one per trained model (non-private and dp-sgd)
    tasks = [line for line in err if re.match(r"\[\d/2\] audit-trial: .* \(elapsed .*, ETA ", line)]
    assert len(tasks) == 2, err
    assert "\x1b[" not in outcome.stderr and "\r" not in outcome.stderr
    assert not [line for line in err if "Warning" in line], err


def test_one_verdict_line_per_run(tiny_run):
    out_dir, outcome = tiny_run
    res = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    lines = [line for line in outcome.stdout.splitlines() if line.startswith("VERDICT ")]
    assert len(lines) == len(res["runs"]) == 2
    for run, line in zip(res["runs"], lines, strict=True):
        assert line.startswith(f"VERDICT {run['name']}: {run['verdict']['level'].upper()}; ")
        for part in ("strongest ", "AUC ", "TPR@1%FPR", "ε_lb", "claim "):
            assert part in line, (part, line)


def test_quiet_keeps_only_verdict_lines(tiny_run_dir, tiny_config_path, tmp_path, cli):
    """A resumed run (every task reused, nothing trained) with --quiet."""
    out = tmp_path / "out"
    outcome = cli(
        [
            "run",
            str(tiny_config_path),
            "--out",
            str(out),
            "--run-dir",
            str(tiny_run_dir / "run"),
            "--resume",
            "--quiet",
        ]
    )
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr == ""
    lines = outcome.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("VERDICT ") for line in lines), lines
    assert (out / "results.json").is_file() and (out / "report.html").is_file()


def test_dp_lm_trainers_print_one_line_per_epoch(capsys):
    """The DP-SGD LM loops (own engine, Opacus-style) report progress in a CI log too:
    stderr is not a terminal under pytest, so each prints one line per epoch."""
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.scale.tasks import task_data, task_target
    from privacy_audit.defenses import DEFENSES
    from privacy_audit.targets.classifier import TrainingConfig

    cfg = parse_config(
        {
            "data": {"n_members": 16, "n_nonmembers": 16, "n_test": 8},
            "target": {"preset": "tiny-gpt2-word", "max_length": 16},
            "defenses": [{"name": "none"}],
        }
    )
    data = task_data(cfg)
    training = TrainingConfig(epochs=2, batch_size=8, max_length=16, progress=True)
    for name in ("phantom-dp-sgd", "dp-sgd"):
        DEFENSES[name](epsilon=8.0, accountant="rdp").fit(
            task_target(cfg, data), data.members, training, 0
        )
        err = capsys.readouterr().err.splitlines()
        lines = [line for line in err if re.search(r": epoch \d/2 \(\d+%\) elapsed .* ETA", line)]
        assert len(lines) == 2, err
        assert "\r" not in "\n".join(err) and "\x1b[" not in "\n".join(err)


def test_every_progress_bar_goes_through_progress_bar():
    """tqdm's bar in a log file is a pile of \\r frames: the product makes every bar with
    ``ground.progress.progress_bar``, which prints one line per tenth off a terminal."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    direct = []
    for sub in ("audit", "attacks", "defenses", "reports", "privacy_audit"):
        for p in (root / sub).rglob("*.py"):
            if p.name == "progress.py":
                continue
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"\btqdm\(", line):
                    direct.append(f"{p.relative_to(root)}:{i}")
    assert direct == [], direct


def test_a_bar_off_a_terminal_prints_lines_without_carriage_returns(capsys):
    from privacy_audit.ground.progress import progress_bar

    bar = progress_bar(50, "scoring (one forward pass per text)", True, unit="text", leave=False)
    for _ in range(50):
        bar.update(1)
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 10 and lines[-1].startswith(
        "scoring (one forward pass per text): part 10/10 (100%)"
    )
