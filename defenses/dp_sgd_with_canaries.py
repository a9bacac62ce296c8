"""Dirac gradient canaries that ride inside a real DP-SGD training run.

The white-box one-run audit (Steinke, Nasr & Jagielski 2023, §6; Agrawal et al. 2026,
*Let's Ask Gauss*) needs, for each of m canaries, the *canary-aligned signal*: the sum
over the T released (noisy) updates of the canary's direction. Here the canaries are
records of the training set, not a simulation beside it:

- each canary owns one coordinate j of the flattened trainable parameters. With a
  ``pilot`` (:func:`pilot_gradient`: the gradient of the *initial* model on uniformly
  random token sequences, which looks at no training data) the m coordinates are those
  with the smallest |pilot| among a seeded random pool of max(100·m, 10⁶) coordinates,
  ties at random; without one they are a random m of the pool. Coordinates no input can
  move (a key bias: softmax ignores a shift shared by every key; a position past the
  training length) keep the canary's signal clean. The choice depends on neither the
  training data nor the inclusion bits, so it reveals nothing outside the accountant
  and the one-run bound stays valid;
- each canary is *present* with probability ½ (its secret inclusion bit);
- at every step, each present canary is Poisson-sampled with the run's rate q, exactly
  like a training record, and then contributes a gradient C·e_j of norm C (the clip
  norm, so clipping keeps it whole; a clipping rule that rescales every example rescales
  it too) to the clipped sum, before the mechanism's noise is added;
- after the noise, the released value at j (in units of C, before the division by the
  expected batch size) is added to the canary's signal.

The released update at j also holds the real examples' clipped gradients there
(``interference``). The bound stays valid, since any score computed from the release is
allowed, but the interference costs power. Its spread is kept in :meth:`record` for tests and
benchmarks only: it is an un-noised statistic of the training data, so no audit record,
report or results file shows it. The privacy claim covers every record, canaries included: each one is one
more row of the Poisson-sampled dataset (the accountant's ε does not depend on n).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class GradientCanaries:
    """``m`` Dirac gradient canaries for the trainable ``params`` of one run.

    ``clip_weight(norm)`` is the clipping rule's per-example weight for a gradient of
    the given norm (``1`` for plain clipping at the clip norm); the canary's contribution
    is ``clip_weight(C)·C``."""

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        m: int,
        clip_norm: float,
        sample_rate: float,
        seed: int = 0,
        clip_weight=None,
        pilot: dict | None = None,
    ) -> None:
        if m < 2:
            raise ValueError(f"gradient canaries must be at least 2, got {m}")
        if not (0 < sample_rate <= 1):
            raise ValueError(f"sample rate must be in (0, 1], got {sample_rate!r}")
        sizes = [p.numel() for p in params]
        total = sum(sizes)
        if total < m:
            raise ValueError(f"{m} gradient canaries need {m} coordinates; the model has {total}")
        self.params = list(params)
        self.m = int(m)
        self.clip_norm = float(clip_norm)
        self.sample_rate = float(sample_rate)
        gen = torch.Generator().manual_seed(int(seed) * 7919 + 0x5CA)
        self.included = torch.randint(0, 2, (m,), generator=gen).bool()
        self._sampler = torch.Generator().manual_seed(int(seed) * 7919 + 0x5CB)
        self._pick = torch.Generator().manual_seed(int(seed) * 7919 + 0x5CC)
        self._sizes = sizes
        self._total = total
        self._slots: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        norm = torch.tensor([self.clip_norm], dtype=torch.float64)
        weight = float(clip_weight(norm)[0]) if clip_weight is not None else 1.0
        self.contribution = weight * self.clip_norm  # Σ_i w_i g_i at j, per present canary
        self.signal = np.zeros(m)
        self.interference = np.zeros(m)
        self.appearances = np.zeros(m, dtype=np.int64)
        self.steps = 0
        self._pending: torch.Tensor | None = None
        self.selected_magnitude: float | None = None
        self._select(pilot)

    def _select(self, pilot: dict | None) -> None:
        """Choose the m coordinates (see the module docstring); ``pilot`` holds no
        training data."""
        pool_size = min(self._total, max(100 * self.m, 1_000_000))
        pool = torch.empty(0, dtype=torch.int64)
        while pool.numel() < pool_size:  # distinct, without a permutation of the model
            draw = torch.randint(0, self._total, (2 * pool_size,), generator=self._pick)
            pool = torch.unique(torch.cat([pool, draw]))
        pool = pool[torch.randperm(pool.numel(), generator=self._pick)[:pool_size]]
        bounds = torch.tensor(np.cumsum([0, *self._sizes]), dtype=torch.int64)
        owner = torch.searchsorted(bounds, pool, right=True) - 1
        mag = torch.zeros(pool.numel(), dtype=torch.float64)
        for k, p in enumerate(self.params):
            sel = torch.nonzero(owner == k).flatten()
            if sel.numel() and pilot is not None and pilot.get(p) is not None:
                flat = pilot[p].detach().reshape(-1)
                local = (pool[sel] - bounds[k]).to(flat.device)
                mag[sel] = flat[local].abs().to("cpu", torch.float64)
        tie = torch.rand(pool.numel(), generator=self._pick, dtype=torch.float64)
        order = np.lexsort((tie.numpy(), mag.numpy()))[: self.m]  # smallest |g|, random ties
        coords = pool[torch.as_tensor(order)]
        owner = owner[torch.as_tensor(order)]
        if pilot is not None:
            self.selected_magnitude = float(mag[torch.as_tensor(order)].max())
        for k in range(len(self.params)):
            ids = torch.nonzero(owner == k).flatten()
            if ids.numel():
                self._slots.append((k, coords[ids] - bounds[k], ids))

    def inject(self, sums: dict) -> None:
        """Add this step's sampled present canaries to the clipped sums ``{param: tensor}``
        (in place, before the noise)."""
        if self._pending is not None:
            raise RuntimeError("inject() called twice without observe()")
        sampled = (torch.rand(self.m, generator=self._sampler) < self.sample_rate) & self.included
        self._pending = sampled
        self.appearances += sampled.numpy()
        for k, local, ids in self._slots:
            p = self.params[k]
            t = sums[p]
            if not t.is_contiguous():
                sums[p] = t = t.contiguous()
            flat = t.view(-1)
            idx = local.to(flat.device)
            self.interference[ids.numpy()] += (
                flat[idx].detach().to("cpu", torch.float64).numpy() / self.clip_norm
            )
            add = sampled[ids].to(flat.dtype).to(flat.device) * self.contribution
            flat.index_add_(0, idx, add)

    def observe(self, released: dict, scale: float = 1.0) -> None:
        """Read the released (noisy) update at each canary's coordinate; ``scale`` undoes a
        division already applied (the expected batch size)."""
        if self._pending is None:
            raise RuntimeError("observe() called without inject()")
        for k, local, ids in self._slots:
            flat = released[self.params[k]].detach().reshape(-1)
            vals = flat[local.to(flat.device)].to("cpu", torch.float64).numpy()
            self.signal[ids.numpy()] += vals * scale / self.clip_norm
        self.steps += 1
        self._pending = None

    def record(self) -> dict[str, Any]:
        """What the release carries: signals, secret inclusion bits and diagnostics."""
        absent = ~self.included.numpy()
        return {
            "signals": self.signal.copy(),
            "included": self.included.numpy().astype(np.int64),
            "steps": self.steps,
            "sample_rate": self.sample_rate,
            "contribution": self.contribution / self.clip_norm,
            "mean_appearances_present": float(self.appearances[~absent].mean())
            if (~absent).any()
            else 0.0,
            # the largest |pilot gradient| among the chosen coordinates (None: no pilot)
            "selected_pilot_magnitude": self.selected_magnitude,
            # un-noised statistic of the training data: for tests and benchmarks, never
            # copied into an audit record, report or results file
            "interference_sd": float(np.std(self.interference)),
        }


def pilot_gradient(model, params, vocab_size: int, length: int, kind: str, seed: int = 0):
    """|gradient| of ``model`` (as it is: call it before training) on sequences of random
    tokens that hold every vocabulary entry at least once (so an input-embedding row
    real data can reach is never mistaken for an unused one), one value per parameter. ``kind``: ``"causal-lm"`` (summed
    next-token loss) or ``"classifier"`` (summed cross-entropy against random labels).
    Uses no training data, so coordinates chosen from it reveal nothing about it; the
    model's gradients, training mode and the global RNG are left as they were."""
    gen = torch.Generator().manual_seed(int(seed) * 7919 + 0x5CD)
    dev = next(model.parameters()).device
    length = int(length)
    rows = min(256, max(8, -(-int(vocab_size) // length)))  # ⌈V / L⌉, at least 8, at most 256
    perm = torch.cat(
        [
            torch.randperm(int(vocab_size), generator=gen)
            for _ in range(-(-rows * length // vocab_size))
        ]
    )
    ids = perm[: rows * length].reshape(rows, length).to(dev)
    mask = torch.ones_like(ids)
    saved = [p.grad for p in params]
    was_training = model.training
    model.eval()  # no dropout: the global RNG, and so the training run, is left untouched
    try:
        for p in params:
            p.grad = None
        with torch.enable_grad():
            if kind == "causal-lm":
                logits = model(input_ids=ids, attention_mask=mask).logits
                loss = torch.nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                    ids[:, 1:].reshape(-1),
                    reduction="sum",
                )
            else:
                from privacy_audit.targets.classifier import forward_kwargs

                logits = model(**forward_kwargs(model, ids, mask)).logits
                labels = torch.randint(0, logits.shape[-1], (len(ids),), generator=gen).to(dev)
                loss = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
            loss.backward()
        return {
            p: (p.grad.detach().abs() if p.grad is not None else torch.zeros_like(p))
            for p in params
        }
    finally:
        for p, g in zip(params, saved, strict=True):
            p.grad = g
        model.train(was_training)


class SampledGradientCanaries:
    """``m`` Dirac gradient canaries that are ROWS of the training set (the record design).

    Unlike :class:`GradientCanaries` (added to the clipped sum, sampled by their own
    Poisson draw), these go through the trainer's code path like data:

    - each present canary (inclusion bit ½) is a row of the dataset; the training loop's
      own sampler puts it in batches (so a sampler that shuffles instead of Poisson
      sampling moves them too);
    - in a batch, it is a per-example gradient ``magnitude·C·e_j`` that the engine's
      own clipping code clips with the data (a correct clip scales it to C·e_j; a group
      left unclipped keeps ``magnitude·C``);
    - coordinates are stratified over parameter groups: the no-weight-decay group
      (biases, LayerNorm: parameters with fewer than 2 dimensions) gets up to
      ``group_share`` of the canaries, at most half of its coordinates, so a group the
      code treats differently is always probed; within a group, the coordinates with the
      smallest |pilot gradient| (:func:`pilot_gradient`, random tokens, no training data)
      are taken, ties at random (random without a pilot);
    - every step's released value at j (in units of C, before the division by the expected
      batch size) is kept, and the canary's score is the likelihood ratio of the
      transcript, Σ_t log(1 − q + q·exp((o_t − 1/2)/s²)), with s the claimed noise σ or
      (default) the coordinate's own robust spread (see :meth:`scores`). Any score gives
      a valid one-run bound; with s = σ it is Neyman–Pearson optimal when the claim is
      right.

    Coordinate choice, inclusion bits and magnitudes depend on no training data.
    """

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        m: int,
        clip_norm: float,
        seed: int = 0,
        magnitude: float = 10.0,
        group_share: float = 0.5,
        pilot: dict | None = None,
    ) -> None:
        if m < 2:
            raise ValueError(f"gradient canaries must be at least 2, got {m}")
        if not magnitude >= 1:
            raise ValueError(f"canary magnitude must be >= 1 (x clip norm), got {magnitude!r}")
        self.params = list(params)
        self.m = int(m)
        self.clip_norm = float(clip_norm)
        self.magnitude = float(magnitude)
        gen = torch.Generator().manual_seed(int(seed) * 7919 + 0x5CE)
        self.included = torch.randint(0, 2, (m,), generator=gen).bool()
        self.present = torch.nonzero(self.included).flatten()
        self.present_count = int(self.present.numel())
        small = [k for k, p in enumerate(self.params) if p.ndim < 2]
        large = [k for k, p in enumerate(self.params) if p.ndim >= 2]
        coords: list[tuple[int, int]] = []
        for ks, share in ((small, group_share), (large, 1.0)):
            cells = [(k, i) for k in ks for i in range(self.params[k].numel())]
            want = min(self.m - len(coords), int(share * self.m) if ks is small else self.m)
            want = min(want, len(cells) // 2 if ks is small else len(cells))
            tie = torch.rand(len(cells), generator=gen, dtype=torch.float64).numpy()
            mag = np.zeros(len(cells))
            if pilot is not None:  # smallest |pilot gradient| first: least data interference
                mag = np.concatenate(
                    [pilot[self.params[k]].detach().reshape(-1).abs().cpu().numpy() for k in ks]
                    or [np.zeros(0)]
                ).astype(np.float64)
            pick = np.lexsort((tie, mag))[:want]
            coords += [cells[i] for i in pick.tolist()]
        if len(coords) < self.m:
            raise ValueError(f"{m} canaries need {m} coordinates; the model has too few")
        order = torch.randperm(self.m, generator=gen).tolist()  # groups mixed over canaries
        self.coords = [coords[i] for i in order]
        by_param: dict[int, tuple[list[int], list[int]]] = {}
        for c, (pk, local) in enumerate(self.coords):
            by_param.setdefault(pk, ([], []))[0].append(c)
            by_param[pk][1].append(local)
        self._by_param = {pk: (np.array(a), torch.tensor(b)) for pk, (a, b) in by_param.items()}
        self.in_small_group = np.array([self.params[k].ndim < 2 for k, _ in self.coords])
        self._batch: torch.Tensor | None = None
        self.observations: list[np.ndarray] = []
        self.appearances = np.zeros(m, dtype=np.int64)

    def set_batch(self, sampled_present: torch.Tensor) -> None:
        """The training loop's choice for this step: one bool per PRESENT canary."""
        self._batch = self.present[sampled_present.nonzero().flatten()]
        self.appearances[self._batch.numpy()] += 1

    def rows(self) -> dict | None:
        """This step's sampled canaries as per-example gradients ``{param: [k, *shape]}``."""
        if self._batch is None or self._batch.numel() == 0:
            return None
        k = int(self._batch.numel())
        out = {p: torch.zeros((k, *p.shape), dtype=p.dtype, device=p.device) for p in self.params}
        for r, c in enumerate(self._batch.tolist()):
            pk, local = self.coords[c]
            out[self.params[pk]].view(k, -1)[r, local] = self.magnitude * self.clip_norm
        return out

    def observe(self, released: dict, scale: float = 1.0) -> None:
        vals = np.empty(self.m)
        for pk, (ids, local) in self._by_param.items():
            flat = released[self.params[pk]].detach().reshape(-1)
            vals[ids] = flat[local].to("cpu", torch.float64).numpy() * scale
        self.observations.append(vals / self.clip_norm)
        self._batch = None

    def scores(
        self, noise_multiplier: float, sample_rate: float, adaptive: bool = True
    ) -> np.ndarray:
        """Per-canary likelihood ratio of the transcript (higher = present).

        ``adaptive=False``: under the claimed mechanism, o_t ~ N(1[sampled], σ²).
        ``adaptive=True`` (default): each canary's transcript is centred on its median
        and scaled by its own robust spread s_j = 1.4826·MAD_t(o_jt) (floor 10⁻³), i.e.
        the noise the coordinate really carries: a coordinate the code forgets to noise
        has s_j ≪ σ and its spikes stand out. Both use the transcript alone (no inclusion
        bit), so the one-run bound stays valid."""
        o = np.asarray(self.observations).T  # [m, T]
        if noise_multiplier <= 0 and not adaptive:
            return o.sum(axis=1)
        if adaptive:
            med = np.median(o, axis=1, keepdims=True)
            mad = 1.4826 * np.median(np.abs(o - med), axis=1, keepdims=True)
            a = (o - med - 0.5) / np.maximum(mad, 1e-3) ** 2
        else:
            a = (o - 0.5) / noise_multiplier**2
        q = float(sample_rate)
        return np.logaddexp(np.log1p(-q) if q < 1 else -np.inf, a + np.log(q)).sum(axis=1)


def quiet_coordinate(params: list[torch.nn.Parameter], pilot: dict | None, seed: int = 0):
    """``(parameter index, flat index)`` of one weight-matrix coordinate (a parameter with
    >= 2 dimensions) with the smallest |pilot gradient| (:func:`pilot_gradient`; random
    tokens, no training data), ties at random: where real data interferes least."""
    gen = torch.Generator().manual_seed(int(seed) * 7919 + 0x5CF)
    cells, mag = [], []
    for k, p in enumerate(params):
        if p.ndim < 2:
            continue
        cells += [(k, i) for i in range(p.numel())]
        mag.append(
            pilot[p].detach().reshape(-1).abs().double().cpu().numpy()
            if pilot is not None
            else np.zeros(p.numel())
        )
    if not cells:
        raise ValueError("the model has no weight matrix for the canary's coordinate")
    tie = torch.rand(len(cells), generator=gen, dtype=torch.float64).numpy()
    return cells[int(np.lexsort((tie, np.concatenate(mag)))[0])]


class AnchorPairCanary:
    """One Dirac canary and ``anchors`` copies of its opposite, rows of the dataset: the
    many-runs white-box audit of a clip applied to the batch SUM (``clip-after-aggregation``).

    Clipping the aggregate bounds the batch's update by C, but not one example's
    influence on it: if the rest of the batch sums to −A·e_j (clipped to −C·e_j) and the
    canary adds +G·e_j with G > A, the clipped sum flips to +C·e_j, a move of 2C, twice
    the per-example sensitivity the accountant assumes. DP must hold for every dataset,
    so the auditor may craft this one:

    - the **anchor** is ``anchors`` rows (K) of per-example gradient −``anchor_magnitude``·C·e_j
      each. The training loop's own Poisson sampler draws them, so at least one is in a
      step with probability 1 − (1 − q)^K (≈ 1 − 2·10⁻⁵ at K = 200, q = 0.052): the
      anchor is in the batch whenever the canary is, up to that;
    - the **canary** is one more row (present or not: the side of the run), of gradient
      +``canary_magnitude``·C·e_j, larger than all K anchors together, so a batch holding
      it sums to a positive multiple of e_j whatever the anchors drawn;
    - the coordinate j is a weight-matrix coordinate with small pilot gradient
      (:func:`quiet_coordinate`), the same in every run.

    With the bug, a step releases ≈ −C at j with the anchor alone and +C with the canary
    (o_t in units of C: −1 vs +1 plus N(0, σ²)); per-example clipping releases −K_t + 1
    vs −K_t. The run's score is the likelihood ratio of that bug's transcript,
    Σ_t log(1 − q + q·exp(2·o_t/σ²)); any score gives a valid bound, so the correct
    trainer is audited with the same one."""

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        clip_norm: float,
        coordinate: tuple[int, int],
        present: bool,
        anchors: int = 200,
        anchor_magnitude: float = 100.0,
        canary_magnitude: float | None = None,
    ) -> None:
        if anchors < 1:
            raise ValueError(f"anchor copies must be at least 1, got {anchors}")
        if not anchor_magnitude >= 1:
            raise ValueError(
                f"anchor magnitude must be >= 1 (x clip norm), got {anchor_magnitude!r}"
            )
        self.params = list(params)
        self.clip_norm = float(clip_norm)
        self.coordinate = (int(coordinate[0]), int(coordinate[1]))
        self.present = bool(present)
        self.anchors = int(anchors)
        self.anchor_magnitude = float(anchor_magnitude)
        # larger than every anchor together: a batch with the canary points to +e_j
        self.canary_magnitude = float(
            canary_magnitude if canary_magnitude is not None else 10.0 * anchors * anchor_magnitude
        )
        if not self.canary_magnitude > self.anchors * self.anchor_magnitude:
            raise ValueError("the canary must outweigh all anchor copies together")
        self.present_count = self.anchors + int(self.present)  # rows of the dataset
        self._batch: tuple[int, bool] | None = None
        self.anchor_counts: list[int] = []  # K_t: anchor copies drawn at step t
        self.canary_steps: list[bool] = []  # the canary drawn at step t
        self.observations: list[float] = []  # released value at j, units of C

    def set_batch(self, sampled_present: torch.Tensor) -> None:
        """The training loop's draw for this step: one bool per row (anchors, then canary)."""
        k = int(sampled_present[: self.anchors].sum())
        c = bool(self.present and sampled_present[self.anchors])
        self._batch = (k, c)
        self.anchor_counts.append(k)
        self.canary_steps.append(c)

    def rows(self) -> dict | None:
        """This step's drawn anchor copies and canary as per-example gradients."""
        if self._batch is None or sum(self._batch) == 0:
            return None
        k, c = self._batch
        pk, local = self.coordinate
        out = {
            p: torch.zeros((k + c, *p.shape), dtype=p.dtype, device=p.device) for p in self.params
        }
        flat = out[self.params[pk]].view(k + c, -1)
        flat[:k, local] = -self.anchor_magnitude * self.clip_norm
        if c:
            flat[k, local] = self.canary_magnitude * self.clip_norm
        return out

    def observe(self, released: dict, scale: float = 1.0) -> None:
        pk, local = self.coordinate
        v = float(released[self.params[pk]].detach().reshape(-1)[local]) * scale
        self.observations.append(v / self.clip_norm)
        self._batch = None

    def score(self, noise_multiplier: float, sample_rate: float) -> float:
        """Likelihood ratio of the transcript for ``+1`` (canary drawn) against ``−1``
        (anchor alone) at noise σ: Σ_t log(1 − q + q·exp(2·o_t/σ²)) (higher = present)."""
        o = np.asarray(self.observations, dtype=np.float64)
        q = float(sample_rate)
        a = 2.0 * o / max(float(noise_multiplier), 1e-3) ** 2
        return float(np.logaddexp(np.log1p(-q) if q < 1 else -np.inf, a + np.log(q)).sum())


class LoneCanary:
    """One Dirac canary row, the only row of the dataset that touches coordinate j: the
    many-runs white-box audit of a noise scale that is too small (``accumulation-noise-once``:
    gradient accumulation over k micro-batches, the micro-batch std σC/√k added once per
    logical batch, i.e. noise multiplier σ/√k).

    The canary is a row of per-example gradient ``magnitude``·C·e_j (``magnitude`` ≥ 1,
    so per-example clipping cuts it to exactly C); the training loop's own Poisson
    sampler draws it, and the trainer's own clipping and noise code process it. No other
    row has a gradient at j (the crafted dataset is the canary alone), so the release at
    j is known up to the noise: o_t = 1[canary drawn] + N(0, s²) in units of C, with
    s = σ/√k under the bug and s = σ for the correct trainer. Under the bug each step is
    the Poisson(q)-subsampled Gaussian mechanism at noise multiplier σ/√k, the same
    mechanism, in units of the noise, as the anchor pair's clipping bug at k = 4
    (+1 vs −1 at noise σ, i.e. 1 vs 0 at σ/2).

    The run's score is the likelihood ratio of the bug's transcript,
    Σ_t log(1 − q + q·exp((o_t − ½)/s²)) at the hypothesised noise s; any score gives a
    valid bound, so the correct trainer is audited with the same one."""

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        clip_norm: float,
        coordinate: tuple[int, int],
        present: bool,
        magnitude: float = 10.0,
    ) -> None:
        if not magnitude >= 1:
            raise ValueError(f"canary magnitude must be >= 1 (x clip norm), got {magnitude!r}")
        self.params = list(params)
        self.clip_norm = float(clip_norm)
        self.coordinate = (int(coordinate[0]), int(coordinate[1]))
        self.present = bool(present)
        self.magnitude = float(magnitude)
        self.present_count = int(self.present)  # rows of the dataset
        self._drawn = False
        self.canary_steps: list[bool] = []  # the canary drawn at step t
        self.observations: list[float] = []  # released value at j, units of C

    def set_batch(self, sampled_present: torch.Tensor) -> None:
        """The training loop's draw for this step: one bool per present row (the canary)."""
        self._drawn = bool(self.present and sampled_present[:1].any())
        self.canary_steps.append(self._drawn)

    def rows(self) -> dict | None:
        """This step's drawn canary as a per-example gradient ``{param: [1, *shape]}``."""
        if not self._drawn:
            return None
        pk, local = self.coordinate
        out = {p: torch.zeros((1, *p.shape), dtype=p.dtype, device=p.device) for p in self.params}
        out[self.params[pk]].view(1, -1)[0, local] = self.magnitude * self.clip_norm
        return out

    def observe(self, released: dict, scale: float = 1.0) -> None:
        pk, local = self.coordinate
        v = float(released[self.params[pk]].detach().reshape(-1)[local]) * scale
        self.observations.append(v / self.clip_norm)
        self._drawn = False

    def score(self, noise_multiplier: float, sample_rate: float) -> float:
        """Likelihood ratio of the transcript for N(1, s²) w.p. q (canary drawn) against
        N(0, s²) at noise s = ``noise_multiplier``: Σ_t log(1 − q + q·exp((o_t − ½)/s²))
        (higher = present)."""
        o = np.asarray(self.observations, dtype=np.float64)
        q = float(sample_rate)
        a = (o - 0.5) / max(float(noise_multiplier), 1e-3) ** 2
        return float(np.logaddexp(np.log1p(-q) if q < 1 else -np.inf, a + np.log(q)).sum())


class CanaryUsers:
    """``m`` white-box canary USERS with ``k`` records each, for the user-level one-run
    audit of a user-level DP-SGD trainer (:mod:`privacy_audit.defenses.user_dp_sgd`).

    - each canary user owns one coordinate j of the flattened trainable parameters (a
      seeded random choice of m distinct coordinates: no training data involved);
    - each is *present* with probability ½ (its secret inclusion bit), and then it is a
      user of the dataset: the trainer's own user sampler draws it (Poisson, rate q), and
      its k records join the step as k rows of per-example gradient ``magnitude``·C·e_j
      under its own user id, so the trainer's aggregation and clipping code process them
      (a correct per-user clip turns the user's k·magnitude·C·e_j into C·e_j; a per-example
      clip keeps k·C·e_j: the user-level sensitivity bug);
    - after the noise, the released value at j (in units of C) is kept for every step.

    The score of a canary user is the likelihood ratio of its transcript under the
    claimed mechanism, Σ_t log(1 − q + q·exp((o_t·c − c²/2)/σ²)) with c = 1 (a user moves
    the release by at most C): Neyman–Pearson optimal when the claim is right, and, like
    any statistic of the release, a valid one-run score when it is not. Real users'
    clipped gradients at j (interference) cost power only.

    The unit of the resulting one-run bound is the user: the m canary users are the m
    independently included units of Steinke, Nasr & Jagielski (2023).
    """

    def __init__(
        self,
        dim: int,
        m: int,
        records: int,
        clip_norm: float,
        seed: int = 0,
        magnitude: float = 1.0,
        included=None,
    ) -> None:
        """``included``: fixed inclusion bits (the many-runs audit's side of a run: one
        canary user, present or not) instead of the one-run design's fair coins."""
        if m < (1 if included is not None else 2):
            raise ValueError(f"canary users must be at least 2, got {m}")
        if records < 1:
            raise ValueError(f"records per canary user must be at least 1, got {records}")
        if not magnitude >= 1:
            raise ValueError(f"canary magnitude must be >= 1 (x clip norm), got {magnitude!r}")
        if m > dim:
            raise ValueError(f"{m} canary users need {m} coordinates; the model has {dim}")
        gen = torch.Generator().manual_seed(int(seed) * 7919 + 0x5D0)
        self.m, self.records = int(m), int(records)
        self.clip_norm, self.magnitude = float(clip_norm), float(magnitude)
        self.included = torch.randint(0, 2, (m,), generator=gen).bool()
        if included is not None:
            self.included = torch.as_tensor(np.asarray(included, dtype=bool).reshape(m))
        self.present = torch.nonzero(self.included).flatten()
        self.present_count = int(self.present.numel())
        self.coords = torch.randperm(int(dim), generator=gen)[:m]
        self._batch: torch.Tensor | None = None
        self.observations: list[np.ndarray] = []
        self.appearances = np.zeros(m, dtype=np.int64)

    def set_batch(self, sampled_present: torch.Tensor) -> None:
        """The trainer's user draw for this step: one bool per PRESENT canary user."""
        self._batch = self.present[sampled_present.nonzero().flatten()]
        self.appearances[self._batch.numpy()] += 1

    def rows(self, dim: int, dtype=torch.float32):
        """``(rows [s·k, dim], user [s·k])`` for the s canary users drawn this step (user
        = canary index), or ``(None, None)``."""
        if self._batch is None or self._batch.numel() == 0:
            return None, None
        users = self._batch.repeat_interleave(self.records)
        out = torch.zeros((users.numel(), int(dim)), dtype=dtype)
        out[torch.arange(users.numel()), self.coords[users]] = self.magnitude * self.clip_norm
        return out, users

    def observe(self, released: torch.Tensor) -> None:
        """Keep the released (noisy) sum at each canary user's coordinate, in units of C."""
        vals = released.detach().reshape(-1)[self.coords].to(torch.float64).numpy()
        self.observations.append(vals / self.clip_norm)
        self._batch = None

    def scores(self, noise_multiplier: float, sample_rate: float, contribution: float = 1.0):
        """Per canary user: Σ_t log(1 − q + q·exp((o_t·c − c²/2)/σ²)) (higher = present)."""
        o = np.asarray(self.observations).T  # [m, T]
        c, s2 = float(contribution), max(float(noise_multiplier), 1e-3) ** 2
        q = float(sample_rate)
        a = (o * c - 0.5 * c * c) / s2
        return np.logaddexp(np.log1p(-q) if q < 1 else -np.inf, a + np.log(q)).sum(axis=1)

    def record(self, noise_multiplier: float, sample_rate: float) -> dict[str, Any]:
        """Scores and secret inclusion bits (for the one-run bound) and the design."""
        return {
            "scores": self.scores(noise_multiplier, sample_rate),
            "included": self.included.numpy().astype(np.int64),
            "records_per_user": self.records,
            "steps": len(self.observations),
            "mean_appearances_present": float(self.appearances[self.included.numpy()].mean())
            if self.present_count
            else 0.0,
        }
