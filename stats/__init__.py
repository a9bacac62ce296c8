"""The statistics floor: pure functions over scores and counts, below every other floor
but ground.

- :mod:`~privacy_audit.stats.metrics`: AUC with DeLong intervals, TPR at a fixed FPR with
  Clopper-Pearson and bootstrap intervals, advantage and balanced accuracy.
- :mod:`~privacy_audit.stats.scores`: score transforms and thresholds shared by attacks.
- :mod:`~privacy_audit.stats.estimates`: a proportion or a mean with its interval, as every
  result record carries it.
- :mod:`~privacy_audit.stats.epsilon_bounds`: empirical ε lower bounds from counts (exact
  binomial, one-run, Gaussian f-DP) and the δ checks they share.
- :mod:`~privacy_audit.stats.canary_bounds`: the ε bounds of canary audits.
- :mod:`~privacy_audit.stats.by_user`: statistics with the user as the unit (clustered AUC,
  user bootstrap, conformal p-values, Benjamini-Hochberg, group privacy).
- :mod:`~privacy_audit.stats.split_check`: the blind baseline and its permutation test.

Nothing here imports torch, a model or another floor of the suite.
"""
