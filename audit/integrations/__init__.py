"""How CI and training code call the suite: the CI gate, the pytest plugin, training callbacks and progress (the CLI is privacy_audit.audit.cli)."""
