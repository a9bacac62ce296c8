"""The ground floor: services every layer of the suite stands on.

- :mod:`privacy_audit.ground.errors`: the errors a user can fix (one line, exit 2);
- :mod:`privacy_audit.ground.io`: atomic writes, strict JSON in and out;
- :mod:`privacy_audit.ground.progress`: progress bars that read well in a terminal and a CI log;
- :mod:`privacy_audit.ground.safe_load`: checkpoints loaded without running code from them;
- :mod:`privacy_audit.ground.lock`: one live run per output or run directory.

Nothing here imports any other part of the suite (only the standard library, and numpy,
torch or tqdm inside the functions that need them), so ``defenses``, ``attacks``,
``reports`` and ``audit`` may all import it without an import running up a floor;
tests/project/test_layout.py checks the floor order from the import graph.
"""
