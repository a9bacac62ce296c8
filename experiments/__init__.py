"""The paper-reproduction experiments behind docs/claims.md (issue 39): not installed.

Each module reproduces one paper's claim (or one recorded study of the docs) and is run
from a source checkout, at the repository root:

    python -m experiments.run NAME --out FILE     # the resumable utility experiments
    python -m experiments.lm_lr_grid ...          # the standalone studies, one per module

``privacy-audit experiment NAME`` runs ``experiments.run`` from a checkout; from an
installed wheel it says, in one line, that the experiments are not installed. These
modules may import the product (``privacy_audit``); nothing in the product imports them
(tests/project/test_layout.py), and the wheel holds none of them (tests/project/test_packaging.py).
"""
