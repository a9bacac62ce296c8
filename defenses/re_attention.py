"""Re-Attention (Ding et al., ICML 2024, Sec. 4.3): correct attention for the variance the
DP noise gives each key, and the ``re-attention`` defense (phantom DP-SGD + Re-Attention).

**Why.** Under DP-SGD every row of the embedding gets noise at every step but signal only
when its token is sampled, so rare tokens carry large noise ("effective error",
σ_eff^{E_i} = σ·C/(B·p_i), Claim 4.2). A key K_j with variance σ_j² has a logit
⟨q,K_j⟩ ~ N(⟨q,k_j⟩, C σ_j²) (C = ‖q‖²/d_k with GPT-2's 1/√d_k scaling), and
E[exp(logit)] = exp(⟨q,k_j⟩)·exp(Cσ_j²/2): noisy keys attract undeserved attention.

**Correction** (Eq. 20 in logit space): ``logit_ij −= C_i σ_j² / 2`` and softmax, i.e. the
paper's division ``S_ij / exp(C σ_j²/2)`` followed by renormalisation (``renormalize=False``
gives the raw division, whose rows do not sum to one).

**Variance tracking** (moment matching, Sec. 4.3.2), per token and coordinate, under
``torch.no_grad`` (the variance is a constant of the forward pass):

- setup: ``Var[E_i] = (var_scale·σ·C/(B·p_i))²`` for embedding row i,
  ``Var[W] = (var_scale·σ·C/B)²`` for every other parameter (positional embedding,
  LayerNorm, linear weights and biases); the noisy parameters themselves are the means;
- linear layers (Eq. 30 summed over the input dimension):
  ``Var[y] = Var[x] @ (W² + Var[W]) + x² @ Var[W] + Var[b]``;
- GELU: the ReLU moment formula (Remark C.3) **with the erratum fixed**
  (``Var = (c²+v)Φ(c/√v) + c√v φ(c/√v) − E[ReLU]²``, not ``− c²``), see :func:`relu_moments`;
  ``activation_variance="gelu-linear"`` uses ``GELU'(c)² v`` instead;
- the means along the tracked path are the model's own activations (θ_private as the mean);
- **choices the paper leaves open** (named options, defaults first):
  ``layernorm="linearised"``: ``Var[y] = γ² Var[x] / (s² + eps) + Var[γ] x̂² + Var[β]``
  with the normalising statistics taken at the mean (their noise is ignored);
  ``residual="add"``: variances add (branches treated as independent);
  values are mixed with the mean attention weights, ``Var = A² @ Var[V]``;
  ``heads="per-head"``: σ_j² is the mean of key j's variance over that head's coordinates
  (``key_variance="isotropic"``); ``key_variance="per-coordinate"`` uses
  ``Σ_c q_c² Var[K_jc]`` instead of ``‖q‖² σ_j²``; the query is treated as exact;
- ``apply_at_eval=True``: the released model keeps the correction.

Token-inclusion probabilities p_i = Pr[token i ∈ sequence] are **estimated from public
data** (the fixture public split, add-one smoothed; ``p_source="public"``), so they cost
no privacy; ``p_source="uniform"`` sets p_i = 1 (every row treated like a weight).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privacy_audit.defenses.base import Defense, Examples, TrainingReport

IMPL = "re_attention"
P_SOURCES = ("public", "uniform")
KEY_VARIANCE = ("isotropic", "per-coordinate")
ACTIVATION_VARIANCE = ("relu-formula", "gelu-linear")

_SQRT2PI = math.sqrt(2 * math.pi)


# --------------------------------------------------------------------------- #
# moment formulas
# --------------------------------------------------------------------------- #
def _phi(x):
    return torch.exp(-0.5 * x * x) / _SQRT2PI


def _Phi(x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


def relu_moments(mean: Tensor, var: Tensor) -> tuple[Tensor, Tensor]:
    """Exact mean and variance of ReLU(X), X ~ N(mean, var) (Lemma C.2, erratum fixed)."""
    var = var.clamp(min=0)
    sd = var.sqrt()
    safe = torch.where(sd > 0, sd, torch.ones_like(sd))
    z = mean / safe
    m1 = torch.where(sd > 0, mean * _Phi(z) + sd * _phi(z), mean.clamp(min=0))
    m2 = torch.where(
        sd > 0, (mean**2 + var) * _Phi(z) + mean * sd * _phi(z), mean.clamp(min=0) ** 2
    )
    return m1, (m2 - m1**2).clamp(min=0)


def relu_var_printed(mean: Tensor, var: Tensor) -> Tensor:
    """Eq. 31 as printed (``− c²`` instead of ``− E[ReLU]²``); wrong, kept for tests."""
    sd = var.sqrt()
    z = mean / sd
    return _Phi(z) * (mean**2 + var) + mean * sd * _phi(z) - mean**2


def linear_var(mx: Tensor, vx: Tensor, weight: Tensor, var_w: float, var_b: float) -> Tensor:
    """Eq. 30 summed over inputs: Var[x W + b] for independent x, W (Conv1D layout [in,out])."""
    return vx @ (weight**2 + var_w) + (mx**2).sum(-1, keepdim=True) * var_w + var_b


# --------------------------------------------------------------------------- #
# setup: effective error and token-inclusion probabilities
# --------------------------------------------------------------------------- #
def token_inclusion_probs(tokenizer, texts: list[str], smoothing: float = 1.0) -> Tensor:
    """p_i = (#sequences containing token i + smoothing) / (N + 2·smoothing)."""
    counts = np.zeros(tokenizer.vocab_size)
    for text in texts:
        ids = {tokenizer.bos_id, tokenizer.eos_id, *tokenizer.token_ids(text)}
        counts[list(ids)] += 1
    return torch.as_tensor((counts + smoothing) / (len(texts) + 2 * smoothing))


@dataclass(frozen=True)
class NoiseSetup:
    """Per-parameter noise variances of the released (noisy) parameters."""

    weight_var: float  # (var_scale·σ·C/B)²
    token_var: Tensor  # (var_scale·σ·C/(B·p_i))², shape [V]

    @classmethod
    def from_dp(
        cls, sigma: float, clip: float, batch: float, p: Tensor, var_scale: float = 1.0
    ) -> NoiseSetup:
        if sigma < 0:
            raise ValueError(f"noise multiplier must be >= 0, got {sigma}")
        eff = var_scale * sigma * clip / batch
        return cls(eff**2, (eff / p.clamp(min=1e-12)) ** 2)


# --------------------------------------------------------------------------- #
# variance propagation through GPT-2
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class ReAttentionOptions:
    key_variance: str = "isotropic"
    activation_variance: str = "relu-formula"
    renormalize: bool = True
    apply_at_eval: bool = True

    def __post_init__(self) -> None:
        if self.key_variance not in KEY_VARIANCE:
            raise ValueError(
                f"unknown key_variance {self.key_variance!r}; allowed: {', '.join(KEY_VARIANCE)}"
            )
        if self.activation_variance not in ACTIVATION_VARIANCE:
            raise ValueError(
                f"unknown activation_variance {self.activation_variance!r}; allowed: "
                f"{', '.join(ACTIVATION_VARIANCE)}"
            )


def _layernorm(ln, m: Tensor, v: Tensor, wv: float) -> tuple[Tensor, Tensor]:
    mu = m.mean(-1, keepdim=True)
    s2 = m.var(-1, unbiased=False, keepdim=True)
    xhat = (m - mu) / torch.sqrt(s2 + ln.eps)
    out = xhat * ln.weight + ln.bias
    return out, ln.weight**2 * v / (s2 + ln.eps) + wv * xhat**2 + wv


def _conv(layer, m: Tensor, v: Tensor, wv: float) -> tuple[Tensor, Tensor]:
    # functional (not layer(m)): module hooks, e.g. phantom's captures, must not fire here
    return m @ layer.weight + layer.bias, linear_var(m, v, layer.weight, wv, wv)


@torch.no_grad()
def key_variances(
    model, input_ids: Tensor, attention_mask: Tensor | None, noise: NoiseSetup, opts
) -> tuple[list[Tensor], Tensor]:
    """Per-layer key variances, each [B, H, T] (isotropic) or [B, H, T, d_h], and the
    final hidden means (equal to the model's own last hidden state before ``ln_f``)."""
    tr = model.transformer
    b, t = input_ids.shape
    wv = noise.weight_var
    pos = torch.arange(t, device=input_ids.device)
    mean = tr.wte.weight[input_ids] + tr.wpe.weight[pos][None]
    tv = noise.token_var.to(mean.device, mean.dtype)[input_ids][..., None]
    var = tv + wv + torch.zeros_like(mean)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    causal = torch.ones(t, t, dtype=torch.bool, device=mean.device).tril()
    allowed = causal[None, None] & attention_mask.bool()[:, None, None, :]
    out: list[Tensor] = []
    for block in tr.h:
        attn = block.attn
        nh, hd = attn.num_heads, attn.head_dim
        m1, v1 = _layernorm(block.ln_1, mean, var, wv)
        mqkv, vqkv = _conv(attn.c_attn, m1, v1, wv)
        d = mean.shape[-1]

        mq, mk, mv = (x.view(b, t, nh, hd).transpose(1, 2) for x in mqkv.split(d, -1))
        _, vk, vv = (x.view(b, t, nh, hd).transpose(1, 2) for x in vqkv.split(d, -1))
        out.append(vk.mean(-1) if opts.key_variance == "isotropic" else vk)
        logits = (mq @ mk.mT) * attn.scaling
        logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
        a = torch.softmax(logits, -1)
        mo = (a @ mv).transpose(1, 2).reshape(b, t, d)
        vo = ((a**2) @ vv).transpose(1, 2).reshape(b, t, d)
        mo, vo = _conv(attn.c_proj, mo, vo, wv)
        mean, var = mean + mo, var + vo
        m2, v2 = _layernorm(block.ln_2, mean, var, wv)
        mf, vf = _conv(block.mlp.c_fc, m2, v2, wv)
        if opts.activation_variance == "relu-formula":
            _, va = relu_moments(mf, vf)
        else:  # GELU linearised at the mean: GELU'(c)² v
            x = mf.detach().requires_grad_(True)
            with torch.enable_grad():
                (slope,) = torch.autograd.grad(block.mlp.act(x).sum(), x)
            va = slope**2 * vf
        ma = block.mlp.act(mf)
        mp, vp = _conv(block.mlp.c_proj, ma, va, wv)
        mean, var = mean + mp, var + vp
    return out, mean


def corrected_attention_logits(
    query: Tensor, logits: Tensor, key_var: Tensor, scaling: float, key_variance: str
) -> Tensor:
    """``logits − C σ_j²/2`` with C = scaling²‖q_i‖² (isotropic) or the per-coordinate sum."""
    if key_variance == "isotropic":
        corr = (scaling**2) * query.pow(2).sum(-1, keepdim=True) * key_var[..., None, :] / 2
    else:
        corr = (scaling**2) * (query.pow(2) @ key_var.mT) / 2
    return logits - corr.to(logits.dtype), corr


def re_attention_forward(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw
):
    """Attention function for ``config._attn_implementation = "re_attention"``; behaves
    exactly like GPT-2's eager attention when the module carries no key variances."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    logits = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        logits = logits + attention_mask
    state = getattr(module, "_re_attn", None)
    kvar = getattr(module, "_re_attn_key_var", None)
    active = (
        state is not None
        and kvar is not None
        and kvar.shape[:3] == key.shape[:3]
        and (module.training or state.apply_at_eval)
    )
    if active:
        corrected, corr = corrected_attention_logits(
            query, logits, kvar, scaling, state.key_variance
        )
        if state.renormalize:
            weights = torch.softmax(corrected, -1)
        else:  # the paper's raw division S / exp(Cσ²/2); rows no longer sum to 1
            weights = torch.softmax(logits, -1) / torch.exp(corr)
    else:
        weights = torch.softmax(logits, -1)
    weights = weights.type(value.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights, value).transpose(1, 2)
    return out, weights


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(IMPL, re_attention_forward)
    AttentionMaskInterface.register(IMPL, eager_mask)


class ReAttention:
    """Installs Re-Attention on a GPT-2 LM: a forward pre-hook tracks the key variances
    for each batch and the attention modules correct their logits. ``remove()`` undoes it."""

    def __init__(self, model, noise: NoiseSetup, options: ReAttentionOptions | None = None):
        _register()
        self.model = model
        self.noise = noise
        self.options = options or ReAttentionOptions()
        self.previous_impl = model.config._attn_implementation
        model.config._attn_implementation = IMPL
        self.attn_modules = [blk.attn for blk in model.transformer.h]
        for m in self.attn_modules:
            m._re_attn = self.options
        self.handle = model.transformer.register_forward_pre_hook(self._pre, with_kwargs=True)

    def _pre(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            for m in self.attn_modules:
                m._re_attn_key_var = None
            return None
        kv, _ = key_variances(
            self.model, ids, kwargs.get("attention_mask"), self.noise, self.options
        )
        for m, v in zip(self.attn_modules, kv, strict=True):
            m._re_attn_key_var = v
        return None

    def remove(self) -> None:
        self.handle.remove()
        for m in self.attn_modules:
            m._re_attn = None
            m._re_attn_key_var = None
        self.model.config._attn_implementation = self.previous_impl


# --------------------------------------------------------------------------- #
# simulation (attention distraction, Sec. 4.2)
# --------------------------------------------------------------------------- #
def simulate_distraction(
    query: Tensor, key_means: Tensor, key_std: Tensor, n_samples: int = 200_000, seed: int = 0
) -> dict[str, Tensor]:
    """Monte Carlo of softmax(⟨q, K_j⟩) with K_j ~ N(k_j, σ_j² I) (logit scale 1).

    Returns the noiseless attention, the mean attention without and with the correction
    (renormalised), and the predicted multiplicative error exp(‖q‖²σ_j²/2)."""
    g = torch.Generator().manual_seed(seed)
    q = query.double()
    k = key_means.double()
    sd = key_std.double()
    true = torch.softmax(k @ q, -1)
    c = q.pow(2).sum()
    corr = c * sd.pow(2) / 2
    plain = torch.zeros_like(true)
    fixed = torch.zeros_like(true)
    done = 0
    while done < n_samples:
        n = min(50_000, n_samples - done)
        keys = k[None] + sd[None, :, None] * torch.randn(n, *k.shape, generator=g, dtype=q.dtype)
        logits = keys @ q
        plain += torch.softmax(logits, -1).sum(0)
        fixed += torch.softmax(logits - corr, -1).sum(0)
        done += n
    return {
        "true": true,
        "uncorrected": plain / n_samples,
        "corrected": fixed / n_samples,
        "predicted_inflation": torch.exp(corr),
    }


# --------------------------------------------------------------------------- #
# the defense
# --------------------------------------------------------------------------- #
def public_texts_default() -> list[str]:
    from privacy_audit import fixtures

    return [r["text"] for r in fixtures.load_corpus("public")]


class ReAttentionDefense(Defense):
    name = "re-attention"
    description = (
        "Phantom-clipping DP-SGD on the tied GPT-2 LM with Re-Attention (attention logits "
        "corrected by the tracked DP-noise variance of each key)."
    )
    PARAMS = {
        "epsilon": ((int, float), 8.0),
        "delta": ((int, float), 1e-5),
        "max_grad_norm": ((int, float), 1.0),
        "noise_multiplier": ((int, float), None),
        "accountant": (str, "prv"),
        "clipping": (str, "clip"),
        "p_source": (str, "public"),
        "var_scale": ((int, float), 1.0),
        "key_variance": (str, "isotropic"),
        "activation_variance": (str, "relu-formula"),
        "renormalize": (bool, True),
        "apply_at_eval": (bool, True),
    }

    def validate(self) -> None:
        from privacy_audit.defenses.phantom_dp_sgd import validate_dp_params

        validate_dp_params(self.name, self.params)
        if self.params["p_source"] not in P_SOURCES:
            raise ValueError(
                f"unknown p_source {self.params['p_source']!r}; allowed: {', '.join(P_SOURCES)}"
            )
        if not self.params["var_scale"] >= 0:
            raise ValueError(f"var_scale must be >= 0, got {self.params['var_scale']!r}")
        self.options()

    def options(self) -> ReAttentionOptions:
        p = self.params
        return ReAttentionOptions(
            p["key_variance"], p["activation_variance"], p["renormalize"], p["apply_at_eval"]
        )

    def fit(self, target, train: Examples, training, seed: int):
        from privacy_audit.defenses.dp_engine import fit_lm_dp
        from privacy_audit.targets.lm import is_lm_target

        if not is_lm_target(target):
            raise ValueError(
                "re-attention trains the causal LM target; set [target] preset = 'tiny-gpt2'"
            )
        p = self.params

        def hook(model, sigma, q, tokenizer) -> dict[str, Any]:
            if p["p_source"] == "public":
                probs = token_inclusion_probs(tokenizer, public_texts_default())
            else:
                probs = torch.ones(tokenizer.vocab_size, dtype=torch.float64)
            batch = q * len(train)
            noise = NoiseSetup.from_dp(
                sigma, float(p["max_grad_norm"]), batch, probs, p["var_scale"]
            )
            ReAttention(model, noise, self.options())
            return {
                "re_attention": {
                    "p_source": p["p_source"],
                    "p_private": False,
                    "var_scale": p["var_scale"],
                    "weight_std": math.sqrt(noise.weight_var),
                    "max_token_std": float(noise.token_var.max().sqrt()),
                    **{k: v for k, v in self.options().__dict__.items()},
                    "layernorm": "linearised",
                    "residual": "add",
                    "heads": "per-head",
                }
            }

        release, info = fit_lm_dp(target, train, training, seed, p, self.name, hook)
        return release, TrainingReport(info)
