"""The per-arm learning-rate grid behind docs/lm-utility-lr-grid.md (issue 27): selection on
the validation split, the public-start and unigram rows, bad input exits 2 before training."""

from __future__ import annotations

from types import SimpleNamespace

from experiments.lm_lr_grid import main, summarise, to_markdown


def _u(v, half):
    return {"value": v, "ci_low": v - half, "ci_high": v + half, "n": 200, "tokens": 9000}


def _cell(arm, lr, val, test, eps=8.0):
    return {
        "arm": arm,
        "learning_rate": lr,
        "validation": _u(val, 0.3),
        "test": _u(test, 0.3),
        "claim": {"epsilon": None if arm == "none" else eps, "delta": 1e-5, "proven": True},
    }


def _res():
    cells = {
        # validation picks 1e-3 although the test set would favour 3e-4: no test-set selection
        "dp-sgd @ lr 0.0003": _cell("dp-sgd", 3e-4, 9.0, 8.0),
        "dp-sgd @ lr 0.001": _cell("dp-sgd", 1e-3, 8.5, 8.6),
        "none @ lr 0.0003": _cell("none", 3e-4, 7.0, 6.9),
    }
    floor = {"unigram_public": _u(221.0, 7.0), "floor": 221.0}
    start = {"test": _u(8.9, 0.35), "validation": _u(9.3, 0.3)}
    cfg = SimpleNamespace(to_dict=lambda: {"target": {"preset": "tiny-gpt2-word"}}, train={})
    res = summarise(cells, ["none", "dp-sgd"], [3e-4, 1e-3], start, floor, cfg)
    res.update(
        command="python -m experiments.lm_lr_grid",
        train={"epochs": 1, "batch_size": 2},
    )
    return res


def test_each_arm_is_selected_on_validation_and_checked_against_the_public_start():
    res = _res()
    rows = {r["arm"]: r for r in res["table"]}
    assert rows["dp-sgd"]["learning_rate"] == 1e-3 and rows["dp-sgd"]["perplexity"] == 8.6
    # 8.6 [8.3, 8.9] overlaps the start's 8.9 [8.55, 9.25]: did not learn
    assert rows["dp-sgd"]["below_public_start"] is False
    assert rows["none"]["below_public_start"] is True
    assert res["not_run"] == ["none @ lr 0.001"]
    md = to_markdown(res)
    assert "| public-only start |" in md and "| unigram floor" in md
    assert "No DP arm beats the public-only start" in md
    assert "Not run: none @ lr 0.001." in md


def test_bad_input_exits_2_before_any_training(tmp_path, capsys):
    out = str(tmp_path / "g.json")
    assert main(["--lrs", "x", "--out", out]) == 2
    assert main(["--arms", "nope", "--out", out]) == 2
    assert main(["--lrs", "-1", "--out", out]) == 2
    assert main(["--out", str(tmp_path / "missing" / "g.json")]) == 2
    assert main(["--epochs", "0", "--out", out]) == 2
    assert not (tmp_path / "g.json").exists()
    assert "error:" in capsys.readouterr().err


def test_a_checkpointed_cell_from_another_setting_is_run_again(tmp_path, capsys):
    # The cells file keys cells by arm and lr only; a cell recorded under another config,
    # batch or budget must never be reused as if it belonged to this grid.
    import json

    cfg = tmp_path / "tiny.toml"
    cfg.write_text(
        'seed = 0\n[data]\ncorpus = "fixtures"\nn_members = 8\nn_nonmembers = 8\nn_test = 8\n'
        '[target]\npreset = "tiny-gpt2-word"\nmax_length = 16\npublic_epochs = 1\n'
        "[train]\nepochs = 1\nbatch_size = 4\nlearning_rate = 1e-3\n"
        '[[defenses]]\nname = "none"\n',
        encoding="utf-8",
    )
    out = tmp_path / "g.json"
    cells_path = tmp_path / "g.json.cells.json"
    argv = ["--config", str(cfg), "--lrs", "1e-3", "--arms", "none", "--out", str(out)]
    assert main(argv) == 0
    first = json.loads(cells_path.read_text(encoding="utf-8"))["none @ lr 0.001"]
    assert first["batch_size"] == 4 and first["setting"]["batch_size"] == 4
    # A second run with the same setting resumes: the cell is not recomputed.
    assert main(argv) == 0
    again = json.loads(cells_path.read_text(encoding="utf-8"))["none @ lr 0.001"]
    assert again["seconds"] == first["seconds"]
    # Another batch size under the same key: re-run, and the log says why.
    capsys.readouterr()
    assert main([*argv, "--batch-size", "2"]) == 0
    third = json.loads(cells_path.read_text(encoding="utf-8"))["none @ lr 0.001"]
    assert third["batch_size"] == 2 and third["setting"]["batch_size"] == 2
    assert "another setting, re-running" in capsys.readouterr().err
    # A cell without a recorded setting (an older checkpoint) is stale too.
    stale = json.loads(cells_path.read_text(encoding="utf-8"))
    del stale["none @ lr 0.001"]["setting"]
    stale["none @ lr 0.001"]["validation"]["value"] = -1.0
    cells_path.write_text(json.dumps(stale), encoding="utf-8")
    assert main([*argv, "--batch-size", "2"]) == 0
    fresh = json.loads(cells_path.read_text(encoding="utf-8"))["none @ lr 0.001"]
    assert fresh["validation"]["value"] > 1.0
