"""``privacy-audit experiment NAME --out FILE``: one paper-claim experiment (long, resumable
per cell), from a source checkout: the experiments are not installed, so the checkout's
``experiments`` package is loaded by its path (:func:`checkout_experiments`). With
``claims``, the only product module that loads an experiment."""

from __future__ import annotations

import sys
from pathlib import Path

from privacy_audit.audit.commands.common import EXIT_OK
from privacy_audit.ground.errors import AuditError

NAME = "experiment"


def add_parser(sub) -> None:
    """Long utility runs behind the paper-claims table, resumable; from a checkout."""
    e = sub.add_parser(
        "experiment",
        help="train and evaluate one paper-claim experiment (resumable per cell); writes JSON "
        "(from a source checkout: experiments/ is not installed)",
    )
    names = list(checkout_experiments().EXPERIMENTS) if checkout_root() else None
    e.add_argument("name", choices=names, help="the experiment to run")
    e.add_argument("--out", required=True, help="JSON output file")
    e.add_argument(
        "--checkpoint-dir",
        help="directory for finished cells; a rerun with the same settings resumes from it",
    )
    e.add_argument("--seeds", type=int, default=3, help="training seeds per cell (default 3)")
    e.add_argument("--n-train", type=int, help="training examples (default: the experiment's)")
    e.add_argument("--n-test", type=int, help="test examples (default: the experiment's)")
    e.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    e.add_argument("--quick", action="store_true", help="tiny shapes (smoke run, not reported)")


#: what ``experiment`` and ``claims`` say from an installed wheel
NO_CHECKOUT = (
    "the paper experiments and their recorded results (experiments/, docs/) are not "
    "installed with the package; run this from a source checkout of privacy-audit"
)


def checkout_root() -> Path | None:
    """The source checkout this CLI runs from (the folder holding pyproject.toml and
    experiments/ above the package), or None from an installed wheel."""
    root = Path(__file__).resolve().parents[2]  # <root>/audit/commands/experiment.py
    ok = (root / "pyproject.toml").is_file() and (root / "experiments" / "run.py").is_file()
    return root if ok else None


def checkout_experiments():
    """The checkout's ``experiments.run`` module (the experiment registry), loaded only by
    the ``experiment`` command at run time; no product module imports an experiment."""
    import importlib
    import importlib.util

    root = checkout_root()
    if root is None:
        raise AuditError(NO_CHECKOUT + " (then: python -m experiments.run NAME --out FILE)")
    if "experiments" not in sys.modules:
        # the package by its path: putting the checkout's root on sys.path would let its
        # other folders (fixtures/, audit/, ...) shadow top-level packages
        folder = root / "experiments"
        spec = importlib.util.spec_from_file_location(
            "experiments", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["experiments"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("experiments.run")


def run(args) -> int:
    experiments = checkout_experiments()  # one line and exit 2 from an installed wheel
    settings = experiments.ExperimentSettings(
        args.seeds, args.quick, args.n_train, args.n_test, args.threads
    )
    experiments.run_to_file(args.name, settings, args.out, args.checkpoint_dir)
    return EXIT_OK
