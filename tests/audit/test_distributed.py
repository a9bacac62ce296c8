"""Ray that cannot start or connect is bad input (exit 2, one line naming what failed and
what was asked for), never an internal error (issue 38, item 6).

Ray's own failure to start a local node is a plain ``Exception`` ("The current node timed
out during startup ... raylet failed to startup"), which used to escape as exit 3.
``ray.init`` is replaced by one that raises what Ray raised, so no Ray process starts.
"""

from __future__ import annotations

import socket

import pytest

ray = pytest.importorskip("ray")

RAYLET = (
    "The current node timed out during startup. This could happen because some of the "
    "raylet failed to startup or the GCS has become overloaded."
)

SMALL = """\
title = "small ray-failure run"
seed = 0
[data]
n_members = 20
n_nonmembers = 20
n_test = 10
[target]
preset = "tiny"
max_length = 16
[train]
epochs = 1
batch_size = 10
[[defenses]]
name = "none"
[attacks]
names = ["loss"]
[metrics]
bootstrap = 100
"""


@pytest.fixture
def failing_init(monkeypatch):
    calls = []

    def init(**kwargs):
        calls.append(kwargs)
        if "address" in kwargs:
            raise ConnectionError(
                f"Could not find any running Ray instance at {kwargs['address']}\nmore"
            )
        raise Exception(RAYLET)  # what ray/_private/node.py raises

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    return calls


def _one_error_line(outcome) -> str:
    assert outcome.code == 2, (outcome.code, outcome.stderr)
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("privacy-audit: error:")
    assert "internal error" not in lines[0]
    return lines[0]


def test_a_local_ray_that_fails_to_start_is_exit_2(failing_init, tmp_path, cli):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL, encoding="utf-8")
    out = tmp_path / "out"
    argv = ["run", str(cfg), "--out", str(out), "--quiet", "--executor", "ray", "--workers", "2"]
    line = _one_error_line(cli(argv))
    assert "cannot start a local Ray" in line
    assert "num_cpus=all" in line and "workers=2" in line and "cpus_per_task=1" in line
    assert "raylet failed to startup" in line and "Exception" in line
    assert len(failing_init) == 1 and "address" not in failing_init[0]
    assert not (out / "results.json").exists() and not (out / "report.html").exists()


def test_a_cluster_that_refuses_the_connection_is_exit_2(failing_init, tmp_path, cli):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL, encoding="utf-8")
    with socket.socket() as listener:  # reachable (the port check passes), but not Ray
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        argv = ["run", str(cfg), "--out", str(tmp_path / "out"), "--quiet"]
        line = _one_error_line(cli([*argv, "--executor", "ray", "--address", address]))
    assert f"cannot connect to the Ray cluster at '{address}'" in line
    assert "ConnectionError: Could not find any running Ray instance" in line
    assert "more" not in line  # Ray's message cut to its first line
    assert failing_init[0]["address"] == address
