"""Targets: the model an audit is about, built or loaded before any defense touches it.

Flow: target (this package) -> defense (``defenses.*``) -> release (surfaces) -> attacks.

- :mod:`privacy_audit.targets.loading`: target specs -- the suite's presets, a local Hugging
  Face directory, a public pretraining stage; nothing is ever downloaded.
- :mod:`privacy_audit.targets.classifier`: training loop and released surfaces of sequence
  classifiers.
- :mod:`privacy_audit.targets.lm`: the causal-LM target, its tokenizers, training loop and
  released surfaces.
- :mod:`privacy_audit.targets.scoring`: a user's Hugging Face tokenizer and causal LM behind
  the same interfaces; one forward pass per text feeds every LM signal.
"""
