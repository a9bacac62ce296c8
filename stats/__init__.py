"""The statistics floor: pure functions over scores and counts, below every other floor
but ground.

- :mod:`~privacy_audit.stats.metrics`: AUC with DeLong intervals, TPR at a fixed FPR with
  Clopper-Pearson and bootstrap intervals, advantage and balanced accuracy.
- :mod:`~privacy_audit.stats.scores`: score transforms and thresholds shared by attacks.
- :mod:`~privacy_audit.stats.estimates`: a proportion or a mean with its interval, as every
  result record carries it.
- :mod:`~privacy_audit.stats.epsilon_bounds`: empirical ε lower bounds of member /
  non-member tests (Clopper-Pearson, Gaussian DP), the (ε, δ)-DP trade-off ceiling, and
  the δ checks every ε bound shares.
- :mod:`~privacy_audit.stats.one_run_bounds`: ε lower bounds from one training run
  (Steinke, Nasr and Jagielski 2023; f-DP, Mahloujifar, Melis and Chaudhuri 2024).
- :mod:`~privacy_audit.stats.canary_bounds`: the ε bounds of canary audits.
- :mod:`~privacy_audit.stats.by_user`: statistics with the user as the unit (clustered AUC,
  user bootstrap, conformal p-values, Benjamini-Hochberg, group privacy).
- :mod:`~privacy_audit.stats.split_check`: is the member / non-member split valid? Runs the
  near-duplicate join and the blind baseline (:class:`SplitCheck`).
- :mod:`~privacy_audit.stats.blind_baseline`: the model-free classifier, its label-
  permutation test, interval and power; DeLong's AUC and paired difference.
- :mod:`~privacy_audit.stats.near_duplicates`: near-duplicate pairs across two text sets
  (exact prefix or partition join, MinHash LSH above a cost budget), near-duplicate groups;
  on :mod:`~privacy_audit.stats.shingles` (the shingle table) and
  :mod:`~privacy_audit.stats.partition_join`.

Nothing here imports torch, a model or another floor of the suite.
"""
