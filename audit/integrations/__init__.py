"""How users and CI call the suite: the CLI, the CI gate, the pytest plugin, training callbacks and progress."""
