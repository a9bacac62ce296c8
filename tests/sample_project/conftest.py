"""Only needed because this sample lives inside the privacy-audit repository.

The suite's own run (``pytest`` from the repository root, rootdir = the repository) would
otherwise collect ``test_privacy.py`` a second time, outside the sample's own config. The
sample's test is run on purpose by ``tests/audit/test_pytest_plugin.py`` (in a copy, through
pytester), or directly with ``pytest tests/sample_project``, which makes this directory the
rootdir (it holds ``pytest.ini``). So: collect here only when this directory is the rootdir.

A project of your own needs no conftest: the plugin is loaded through its ``pytest11``
entry point whenever privacy-audit is installed.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    if config.rootpath.resolve() != HERE:
        return True  # collected as part of an enclosing project: skip the sample
    return None  # no opinion: pytest's usual rules
