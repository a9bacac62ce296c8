"""``privacy-audit bench user-dp --quick``: the figure's pipeline end to end (small)."""

from privacy_audit.audit.benchmarks import BENCHMARKS
from privacy_audit.audit.benchmarks.timing import BenchSettings


def test_bench_user_dp_quick():
    from privacy_audit.audit.benchmarks.user_dp import run

    assert BENCHMARKS["user-dp"].endswith("user_dp:run")
    res = run(BenchSettings(quick=True)).to_dict()
    rows = {(r["audit"], r["trainer"]): r for r in res["setup"]["table"]}
    assert len(rows) == 4
    for (audit, trainer), r in rows.items():
        assert r["claim"]["unit"] == "user"
        lo, hi = r["interval"]
        assert 0 <= lo <= r["violated"] / r["seeds"] <= hi <= 1
        if trainer == "user-dp-sgd":
            assert r["violated"] == 0, (audit, r)
        else:  # per-example clipping under a user claim: k = 8 records, true ε ≫ 1
            assert r["true_user_epsilon_of_canary_users"] > 10 * r["claim"]["epsilon"]
            if audit.startswith("canary users (one-run"):
                assert r["violated"] == r["seeds"] == 3, r
