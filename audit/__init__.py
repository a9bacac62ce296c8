"""Orchestration for the privacy-audit suite: config, data, targets, runner, CLI and gate.

Data flow: ``defenses`` train or wrap a target and release surfaces → ``attacks`` turn
surfaces into per-example scores → ``privacy_audit.stats.metrics`` / ``privacy_audit.stats.epsilon_bounds`` turn scores
into metrics with confidence intervals → ``reports`` renders them.
"""

__version__ = "0.1.0"
