"""Claimed-vs-audited epsilon: canaries, LM canaries, the pipeline canary command and the epsilon audits."""
