"""Bundled configs state their cost (issue 38, item 7): every bundled config has a recorded
full-size time and a ``--quick`` variant with its recorded time; ``run NAME`` prints the
expected time before any work; ``--quick`` is refused where it means nothing."""

from __future__ import annotations

import pytest

from privacy_audit.audit.config import bundled_configs, load_config
from privacy_audit.audit.configs.costs import COSTS, expected_time_line, load_quick


def test_every_bundled_config_has_recorded_times_and_a_smaller_quick_variant():
    assert set(COSTS) == set(bundled_configs())
    for name, cost in COSTS.items():
        assert cost.full.minutes > 0 and cost.full.source, name
        assert 0 < cost.quick_time.minutes <= 5, name  # the quick variant's promise
        assert cost.quick_time.source.startswith("measured: "), name
        full, quick = load_config(name), load_quick(name)
        for key in ("n_members", "n_nonmembers", "n_test"):
            assert quick.data[key] <= full.data[key], (name, key)
        assert quick.data["n_members"] < full.data["n_members"], name
        assert quick.train["epochs"] <= full.train["epochs"], name
        assert "--quick" in quick.title and "not for reporting" in quick.title
        assert [d.name for d in quick.defenses] == [d.name for d in full.defenses], name
        assert quick.attacks == full.attacks, name  # the same battery, smaller


def test_run_prints_the_expected_time_before_any_work(cli, monkeypatch):
    import privacy_audit.audit.runner as runner
    from privacy_audit.ground.errors import AuditError

    def stop(*args, **kwargs):
        raise AuditError("stopped before any work (test)")

    monkeypatch.setattr(runner, "run_audit", stop)
    for argv, quick in ((["run", "dp-forward"], False), (["run", "dp-forward", "--quick"], True)):
        outcome = cli([*argv, "--out", "unused-out"])
        first = outcome.stderr.splitlines()[0]
        assert first == expected_time_line("dp-forward", quick), outcome.stderr
        assert "stopped before any work" in outcome.stderr
    assert "2-core CPU" in expected_time_line("dp-forward", False)
    assert "--quick" in expected_time_line("dp-forward", False)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["missing.toml", "--quick"], "--quick applies to the bundled configs only"),
        (["--quick", "--model", "m", "--members", "a", "--nonmembers", "b"], "--quick applies"),
    ],
)
def test_quick_is_refused_outside_the_bundled_configs(cli, tmp_path, extra, message):
    outcome = cli(["run", *extra, "--out", str(tmp_path / "out")])
    assert outcome.code == 2, outcome.stderr
    assert message in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1


def test_quick_on_a_users_file_is_refused(cli, tmp_path):
    own = tmp_path / "own.toml"
    own.write_text('[[defenses]]\nname = "none"\n', encoding="utf-8")
    outcome = cli(["run", str(own), "--quick", "--out", str(tmp_path / "out")])
    assert outcome.code == 2
    assert "--quick applies to the bundled configs only" in outcome.stderr
