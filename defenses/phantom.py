"""Phantom Clipping (Ding et al., ICML 2024): per-sample gradient norms of a Transformer LM
with **tied** input/output embeddings, without building per-sample gradients.

Public API: :func:`per_sample_grad_norms` ``(model, input_ids, attention_mask=None) ->
Tensor[batch]``, for a ``transformers`` GPT-2 LM-head model with tied embeddings. For each
sequence it returns the L2 norm, over all trainable parameters, of the gradient of that
sequence's loss ``L_i`` = mean next-token cross-entropy over its non-padding positions
(labels are the inputs shifted by one).

How (one forward, one activation-only backward of ``Σ_i L_i``; hooks keep each layer's
input activations ``a`` and output gradients ``g``, which are per-sample because ``L_i``
depends only on sample i):

- **tied embedding E** (Claim B.1, with the erratum fixed and the low-rank output side of
  ``docs/phantom-dp-sgd.md``): ``‖g_E‖² = ⟨A, ∇e_S ∇e_Sᵀ⟩ + ‖Gᵀ H‖² + 2⟨∇e_S, G[:, s]ᵀ H⟩``
  where ``A = [s_l = s_l']`` is the token-equality Gram matrix (no one-hot), ``G = ∂L_i/∂logits``
  and ``H`` the hidden states fed to the head. ``‖Gᵀ H‖²`` is ``⟨GGᵀ, HHᵀ⟩`` when
  ``T ≤ d`` and is otherwise accumulated over vocabulary chunks, so no [B, M, d] tensor is
  ever allocated;
- **linear layers** (GPT-2's ``Conv1D``): ghost norms ``⟨aaᵀ, ggᵀ⟩`` (Li et al. 2022), or,
  when cheaper (``T·(d_in+d_out) > d_in·d_out``), the per-sample weight gradient ``aᵀg``
  (mixed ghost clipping, Bu et al. 2023); ``linear_mode`` forces either;
- **the rest, exactly**: LayerNorm weights ``Σ_t g_t ⊙ x̂_t`` and biases, the learned
  positional embedding ``Σ_t ‖∇p_t‖²`` (positions within a sequence are distinct).

The same captures give the clipped gradient sum by book-keeping (Bu et al. 2023b):
``Σ_i w_i g_i`` is assembled from ``(a, g)`` with per-sample weights, at the cost of the
ordinary weight-gradient products, so a DP step costs one forward and one backward plus
the norms. :func:`explicit_per_sample_grads` (``torch.func.vmap(grad)``) is the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

LINEAR_MODES = ("auto", "ghost", "instantiate")
VARIANTS = ("corrected", "printed")


class UntiedModelError(ValueError):
    """Phantom clipping was given a model whose output embedding is not the input one."""


def check_model(model) -> None:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None or not hasattr(model, "transformer"):
        raise ValueError(
            "phantom clipping needs a transformers GPT-2 LM-head model (GPT2LMHeadModel); "
            f"got {type(model).__name__}"
        )
    if head.weight is not model.get_input_embeddings().weight:
        raise UntiedModelError(
            "phantom clipping needs tied input/output embeddings, but this model's lm_head is a "
            "separate matrix; tie them (GPT2Config(tie_word_embeddings=True)) or use "
            "explicit per-sample gradients (norms='explicit') or Opacus (defense 'dp-sgd') "
            "for an untied model"
        )
    if getattr(head, "bias", None) is not None:
        raise ValueError("phantom clipping does not support a bias on the LM head")


def check_batch(model, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    """Validate a batch; returns the attention mask (all ones when None)."""
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2:
        raise ValueError("input_ids must be a 2-D tensor [batch, length]")
    if input_ids.shape[0] == 0:
        raise ValueError("empty batch: input_ids has no rows")
    n_ctx = int(model.config.n_positions)
    if input_ids.shape[1] > n_ctx:
        raise ValueError(
            f"sequences of length {input_ids.shape[1]} exceed the model's context length "
            f"{n_ctx}; truncate them to at most {n_ctx} tokens"
        )
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask shape {tuple(attention_mask.shape)} differs from input_ids "
            f"shape {tuple(input_ids.shape)}"
        )
    return attention_mask


def check_per_sample_loss(loss: Tensor, batch_size: int) -> None:
    """A per-sample loss must have shape [batch] (``reduction='none'``)."""
    if not isinstance(loss, Tensor) or loss.dim() != 1 or loss.shape[0] != batch_size:
        shape = tuple(loss.shape) if isinstance(loss, Tensor) else type(loss).__name__
        raise ValueError(
            f"per-sample loss must have shape [batch] = [{batch_size}] (reduction='none'); got "
            f"{shape}: a mean- or sum-reduced loss mixes the samples, so per-sample clipping "
            "would clip the batch instead of each example"
        )


def per_sample_token_loss(logits: Tensor, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """L_i: mean next-token cross-entropy over non-padding target positions, shape [B]."""
    lg = logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(
        lg.reshape(-1, lg.shape[-1]), input_ids[:, 1:].reshape(-1), reduction="none"
    ).view(input_ids.shape[0], -1)
    valid = attention_mask[:, 1:].to(nll.dtype)
    return (nll * valid).sum(1) / valid.sum(1).clamp(min=1)


# --------------------------------------------------------------------------- #
# captures
# --------------------------------------------------------------------------- #
@dataclass
class _Rec:
    kind: str  # conv1d | linear | layernorm | wte | wpe | head
    module: torch.nn.Module
    inp: Tensor | None = None
    out: Tensor | None = None
    grad: Tensor | None = None


class PhantomCapture:
    """Context manager: hooks a tied GPT-2 LM so one forward + :meth:`backward` yields
    per-sample squared norms (:meth:`sq_norms`) and weighted gradient sums
    (:meth:`weighted_grads`). Position ids must be batch-shaped; :meth:`forward` does it."""

    def __init__(self, model, linear_mode: str = "auto", variant: str = "corrected") -> None:
        check_model(model)
        if linear_mode not in LINEAR_MODES:
            raise ValueError(
                f"unknown linear_mode {linear_mode!r}; allowed: {', '.join(LINEAR_MODES)}"
            )
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; allowed: {', '.join(VARIANTS)}")
        from transformers.pytorch_utils import Conv1D

        self.model = model
        self.linear_mode = linear_mode
        self.variant = variant
        self.records: list[_Rec] = []
        self._handles: list = []
        tr = model.transformer
        head = model.get_output_embeddings()
        covered: set[int] = set()
        for module in model.modules():
            if module is tr.wte:
                kind = "wte"
            elif module is tr.wpe:
                kind = "wpe"
            elif module is head:
                kind = "head"
            elif isinstance(module, Conv1D):
                kind = "conv1d"
            elif isinstance(module, torch.nn.Linear):
                kind = "linear"
            elif isinstance(module, torch.nn.LayerNorm):
                kind = "layernorm"
            else:
                continue
            self.records.append(_Rec(kind, module))
            covered.update(id(p) for p in module.parameters(recurse=False))
        missing = [
            n for n, p in model.named_parameters() if p.requires_grad and id(p) not in covered
        ]
        if missing:
            raise ValueError(
                f"phantom clipping cannot handle parameter(s) {', '.join(missing[:3])}; "
                "use explicit per-sample gradients"
            )
        self.input_ids: Tensor | None = None
        self.loss: Tensor | None = None

    def __enter__(self) -> PhantomCapture:
        for rec in self.records:
            self._handles.append(rec.module.register_forward_hook(self._hook(rec)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    @staticmethod
    def _hook(rec: _Rec) -> Callable:
        def hook(module, inputs, output):
            rec.inp = inputs[0].detach() if inputs and isinstance(inputs[0], Tensor) else None
            rec.out = output

        return hook

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Run the model (hooks live) and return the per-sample losses L_i, shape [B]."""
        mask = check_batch(self.model, input_ids, attention_mask)
        b, t = input_ids.shape
        pos = torch.arange(t, device=input_ids.device).expand(b, t)
        logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=pos).logits
        self.input_ids = input_ids
        return per_sample_token_loss(logits, input_ids, mask)

    def backward(self, per_sample_loss: Tensor) -> None:
        """Activation-only backward of ``Σ_i L_i`` (no parameter gradient is formed)."""
        if self.input_ids is None:
            raise RuntimeError("call forward() inside the capture before backward()")
        check_per_sample_loss(per_sample_loss, self.input_ids.shape[0])
        recs = [r for r in self.records if r.out is not None and r.out.requires_grad]
        grads = torch.autograd.grad(per_sample_loss.sum(), [r.out for r in recs])
        for r, g in zip(recs, grads, strict=True):
            r.grad = g.detach()
        self.loss = per_sample_loss.detach()

    # -- norms -------------------------------------------------------------------
    def _rec(self, kind: str) -> _Rec:
        return next(r for r in self.records if r.kind == kind)

    def sq_norms(self) -> Tensor:
        """Per-sample squared gradient norm over all trainable parameters, shape [B]."""
        total = self.embedding_sq_norms()
        for r in self.records:
            if r.grad is None or r.kind in ("wte", "head"):
                continue
            if r.kind == "wpe":
                total = total + r.grad.pow(2).sum((1, 2))
            elif r.kind == "layernorm":
                gw, gb = _layernorm_grads(r)
                total = total + gw.pow(2).sum(1) + gb.pow(2).sum(1)
            else:  # conv1d / linear
                total = total + self._linear_sq(r)
        return total

    def _linear_sq(self, r: _Rec) -> Tensor:
        a, g = r.inp, r.grad
        if a.dim() == 2:
            a, g = a[:, None], g[:, None]
        t, din, dout = a.shape[1], a.shape[2], g.shape[2]
        mode = self.linear_mode
        if mode == "auto":
            mode = "ghost" if t * (din + dout) <= din * dout else "instantiate"
        if mode == "ghost":
            w = ((a @ a.mT) * (g @ g.mT)).sum((1, 2))
        else:
            w = (a.mT @ g).pow(2).sum((1, 2))
        if getattr(r.module, "bias", None) is not None:
            w = w + g.sum(1).pow(2).sum(1)
        return w

    def embedding_sq_norms(self) -> Tensor:
        """Phantom clipping for the tied E: ``⟨A,B⟩ + ‖Gᵀ H‖² + 2⟨∇e_S, C⟩`` per sample
        (``variant='printed'`` uses the paper's ``⟨A,B⟩²``, which is wrong)."""
        head = self._rec("head")
        return phantom_embedding_sq_norms(
            self.input_ids, self._rec("wte").grad, head.grad, head.inp, self.variant == "printed"
        )

    # -- book-keeping: Σ_i w_i g_i ------------------------------------------------
    @torch.no_grad()
    def weighted_grads(self, weights: Tensor) -> dict[torch.nn.Parameter, Tensor]:
        """``Σ_i w_i ∂L_i/∂θ`` for every trainable parameter, from the captures."""
        out: dict[torch.nn.Parameter, Tensor] = {}

        def add(p, g):
            if p is not None and p.requires_grad:
                out[p] = out[p] + g if p in out else g

        wcol = weights.to(self.loss.dtype)

        def wt(x: Tensor) -> Tensor:  # scale sample i of x by w_i
            return x * wcol.view(-1, *([1] * (x.dim() - 1)))

        for r in self.records:
            if r.grad is None:
                continue
            m = r.module
            if r.kind == "wte":
                g = wt(r.grad)
                e = torch.zeros_like(m.weight)
                e.index_add_(0, self.input_ids.reshape(-1), g.reshape(-1, g.shape[-1]))
                add(m.weight, e)
            elif r.kind == "head":  # weight H [B,T,d], not G [B,T,M]
                h = wt(r.inp)
                add(m.weight, r.grad.reshape(-1, r.grad.shape[-1]).mT @ h.reshape(-1, h.shape[-1]))
            elif r.kind == "wpe":
                e = torch.zeros_like(m.weight)
                e[: r.grad.shape[1]] = wt(r.grad).sum(0)
                add(m.weight, e)
            elif r.kind == "layernorm":
                gw, gb = _layernorm_grads(r, wcol)
                add(m.weight, gw.sum(0))
                add(m.bias, gb.sum(0))
            else:  # weight the narrower of input activations and output gradients
                a, g = r.inp, r.grad
                if a.shape[-1] <= g.shape[-1]:
                    a = wt(a)
                    gb = (
                        wt(g).reshape(-1, g.shape[-1])
                        if getattr(m, "bias", None) is not None
                        else None
                    )
                else:
                    g = wt(g)
                    gb = g.reshape(-1, g.shape[-1])
                a = a.reshape(-1, a.shape[-1])
                gg = g.reshape(-1, g.shape[-1])
                add(m.weight, a.mT @ gg if r.kind == "conv1d" else gg.mT @ a)
                if gb is not None:
                    add(m.bias, gb.sum(0))
        return out


def phantom_embedding_sq_norms(
    ids: Tensor, g_in: Tensor, logit_grad: Tensor, hidden: Tensor, printed: bool = False
) -> Tensor:
    """Squared per-sample norms of the tied embedding's gradient, low-rank form.

    ``ids`` [B,T] input tokens; ``g_in`` = ∇e_S [B,T,d] (gradient at the input embedding
    output); ``logit_grad`` = G [B,T,M] (∂L_i/∂logits); ``hidden`` = H [B,T,d] (the head's
    input). Returns ``⟨A,B⟩ + ‖GᵀH‖² + 2⟨∇e_S, G[:,:,s]ᵀH⟩`` with A the token-equality
    matrix; ``printed=True`` squares ``⟨A,B⟩`` as the paper's Eq. 21 / Algorithm 1 print it.
    """
    a_eq = (ids[:, :, None] == ids[:, None, :]).to(g_in.dtype)
    t1 = (a_eq * (g_in @ g_in.mT)).sum((1, 2))
    if printed:
        t1 = t1.pow(2)
    t, d = hidden.shape[1], hidden.shape[2]
    if t <= d:
        t2 = ((logit_grad @ logit_grad.mT) * (hidden @ hidden.mT)).sum((1, 2))
    else:  # ‖GᵀH‖² over vocabulary chunks: memory O(B·chunk·d), never [B, M, d]
        t2 = torch.zeros(ids.shape[0], dtype=hidden.dtype, device=hidden.device)
        chunk = max(1, (1 << 22) // max(ids.shape[0] * d, 1))
        for m0 in range(0, logit_grad.shape[2], chunk):
            t2 = t2 + (logit_grad[:, :, m0 : m0 + chunk].mT @ hidden).pow(2).sum((1, 2))
    gathered = logit_grad.gather(2, ids[:, None, :].expand(-1, t, -1))  # G[b,t,s_l]
    t3 = 2 * (g_in * (gathered.mT @ hidden)).sum((1, 2))
    return t1 + t2 + t3


def _layernorm_grads(r: _Rec, weights: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Per-sample LayerNorm weight/bias gradients [B, d] (optionally weighted)."""
    m = r.module
    x = r.inp
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    xhat = (x - mean) / torch.sqrt(var + m.eps)
    g = r.grad if weights is None else r.grad * weights.view(-1, *([1] * (r.grad.dim() - 1)))
    dims = tuple(range(1, g.dim() - 1))
    return (g * xhat).sum(dims), g.sum(dims)


def per_sample_grad_norms(
    model,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    linear_mode: str = "auto",
    variant: str = "corrected",
) -> Tensor:
    """Per-sequence L2 norms of ∂L_i/∂θ over all trainable parameters, shape [batch].

    ``model``: a ``transformers`` GPT-2 LM-head model with tied embeddings. ``L_i`` is the
    mean next-token cross-entropy over sequence i's non-padding positions.
    ``variant='printed'`` reproduces the paper's erroneous ``⟨A,B⟩²`` (for tests only).
    """
    with PhantomCapture(model, linear_mode, variant) as cap:
        loss = cap.forward(input_ids, attention_mask)
        cap.backward(loss)
        return cap.sq_norms().clamp(min=0).sqrt().detach()


# --------------------------------------------------------------------------- #
# explicit reference: torch.func per-sample gradients
# --------------------------------------------------------------------------- #
def explicit_per_sample_grads(
    model,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    chunk_size: int | None = None,
    loss_fn=None,
) -> dict[str, Tensor]:
    """Per-sample gradients ``{name: [B, *param.shape]}`` by ``vmap(grad)`` (tied weights
    appear once, under the input-embedding name). ``chunk_size`` bounds vmap's batch."""
    from torch.func import functional_call, grad, vmap

    mask = check_batch(model, input_ids, attention_mask)
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}

    def loss_one(p, ids1, mask1):
        t = ids1.shape[0]
        out = functional_call(
            model,
            p,
            (),
            {
                "input_ids": ids1[None],
                "attention_mask": mask1[None],
                "position_ids": torch.arange(t, device=ids1.device)[None],
            },
        )
        loss = (loss_fn or per_sample_token_loss)(out.logits, ids1[None], mask1[None])
        check_per_sample_loss(loss, 1)
        return loss[0]

    return vmap(grad(loss_one), in_dims=(None, 0, 0), chunk_size=chunk_size)(
        params, input_ids, mask
    )


def explicit_per_sample_grad_norms(
    model, input_ids: Tensor, attention_mask: Tensor | None = None, chunk_size: int | None = None
) -> Tensor:
    grads = explicit_per_sample_grads(model, input_ids, attention_mask, chunk_size)
    return torch.stack([g.flatten(1).pow(2).sum(1) for g in grads.values()]).sum(0).sqrt()


def phantom_sq_norms_dense(a_s: Tensor, grad_es: Tensor, grad_ec: Tensor, printed=False):
    """Algorithm 1 literally (dense inputs; for tests): a_S [B,L,M] one-hot, ∇e_S [B,L,d],
    per-sample ∇e_C [B,M,d] (a_C = I). ``printed=True`` keeps the paper's ``⟨A,B⟩²``."""
    a = a_s @ a_s.mT
    b = grad_es @ grad_es.mT
    c = a_s @ grad_ec
    ab = (a * b).sum((1, 2))
    return (
        (ab.pow(2) if printed else ab) + grad_ec.pow(2).sum((1, 2)) + 2 * (grad_es * c).sum((1, 2))
    )


__all__ = [
    "PhantomCapture",
    "UntiedModelError",
    "check_per_sample_loss",
    "explicit_per_sample_grad_norms",
    "explicit_per_sample_grads",
    "per_sample_grad_norms",
    "phantom_embedding_sq_norms",
    "phantom_sq_norms_dense",
]
