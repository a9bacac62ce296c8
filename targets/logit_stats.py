"""Per-position statistics of a causal LM's next-token distribution, in the logits' dtype.

Every LM membership signal reads, per predicted position t, four numbers of the
distribution p = softmax(r) over the vocabulary (r: the logits row, V entries): log p of
the target token, mu = E_p[log p] (minus the entropy), sigma^2 = Var_p(log p) (Min-K%++)
and the top-1 token (EZ-MIA's error zone). :func:`position_statistics` computes all four
in one sweep over the logits, block by block (a few positions at a time, so the [block, V]
work buffers stay in the CPU's cache), keeps only T values per text (never [T, V]), and
works in the logits' own precision: float32 for float32 logits, float32 for bfloat16 /
float16 (upcast block by block: their exp and sums would be far too coarse), float64 for
float64 logits (then the result is float64-exact, as the hand-computed known answers
need). The T-sized results are float64.

The computation (m = max r, exact; x = r - m <= 0; e = exp(x); S = sum e >= 1):

    log p(x_t) = (r_t - m) - log S          (r_t - m in float64: exact)
    mu         = sum(e x) / S - log S
    sigma^2    = sum(e (x - c)^2) / S,   c = sum(e x) / S rounded to the work dtype

(the second moment is taken about the mean, not as E[x^2] - E[x]^2, which cancels badly:
E_p[x] can be as low as -log V while the variance is O(1)).

Sums over the vocabulary: in float32, each row is cut into chunks of ``CHUNK`` = 64
consecutive entries; each chunk is summed in float32 (one vectorised pass, whatever order
torch uses) and the chunk sums are added in float64, the ragged tail (V mod 64 entries)
in float64 too. All three sums have terms of one sign (e >= 0, e x <= 0, e (x - c)^2 >= 0),
so a chunk's float32 sum, in any order, is within gamma_63 ~ 63u of its exact value
relative (Higham, Accuracy and Stability, eq. 4.4: every summation tree of k terms has
depth <= k - 1), and the float64 stage adds V * 2^-53 (< 1e-11 for V < 10^5). Summing
whole rows in float32 would allow V u (3e-3 at V = 50,257); summing every term in float64,
with the top-1 from ``max``'s indices, made the sweep 45.4 ms per 256 positions at V =
50,257 against 30.9 ms now (docs/startup-and-costs.md). The top-1 token comes from the same chunks: the
first chunk whose max equals the row's max, then the first index within it (the argmax
with its index is ten times the cost of a plain max on this CPU).

Error bound (float32; u = 2^-24 ~ 5.96e-8, first order in u; K = CHUNK - 1 = 63). With x*
= r - m exact, |x|-moments under the exact p, and d = x* - E_p[x*]: the subtraction r - m
rounds by u|x*|, float32 ``exp`` is within one ulp (2u relative), products round by u, and
each chunked sum adds K u relative. Hence each e_i carries a relative error of at most g_i
= 2u + u|x_i|, and

    |d log S|      <= u (2 + K + E|x|)                      (= |d log p(x_t)|)
    |d mu|         <= u (2 + 7 E|x| + (E|x|)^2 + E[x^2] + K (1 + 2 E|x|))
    |d sigma^2|    <= u (E[2|d||x| + (6 + |x|) d^2] + (2 + 2K + E|x|) sigma^2)

(K enters log S once, the mean sum(e x) / S through its numerator and S, and sigma^2
through its numerator and S). Since x <= 0 and S >= 1, E|x| = H(p) - log S <= log V, so
for GPT-2's V = 50,257 (log V = 10.8) log p is within 4.5e-6 of the float64 value in the
worst case (observed: below 1e-7; the per-term errors average out), and mu within about
1e-4 in the worst case (observed: below 1e-6). A vocabulary of fewer than 64 entries is
summed in float64 throughout (K = 0 there). ``tests/targets/test_logit_stats.py`` checks
every bound, position by position, against a float64 computation on random logits (V =
50,257, logits of scale 1 to 100 and offsets up to 10^4, peaked and bimodal rows).
"""

from __future__ import annotations

import torch

#: work-dtype elements per buffer on the CPU (2 MiB of float32, three buffers in the
#: shared L3): positions per block = this // V, at least 1 (10 at V = 50,257, 128 at 4,096)
BLOCK_ELEMENTS = 1 << 19
#: on an accelerator the buffers live in device memory and every operation is a kernel
#: launch, so blocks are larger: 2^24 elements (64 MiB per float32 buffer, 333 positions at
#: V = 50,257). Not measured on a GPU (none was lent to this work).
DEVICE_BLOCK_ELEMENTS = 1 << 24

#: entries per float32 partial sum (the K + 1 of the bound) and per top-1 chunk
CHUNK = 64

#: unit roundoff of the float32 path (the bounds above are in units of it)
U32 = 2.0**-24


def block_positions(width: int, device) -> int:
    """Positions per block for a vocabulary of ``width`` on ``device``."""
    per = BLOCK_ELEMENTS if torch.device(device).type == "cpu" else DEVICE_BLOCK_ELEMENTS
    return max(1, per // max(int(width), 1))


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the statistics are computed in for logits of ``dtype``."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def summed_terms(width: int, dtype: torch.dtype) -> int:
    """The most terms any float32 partial sum adds for rows of ``width`` (the bound's
    K + 1): ``CHUNK`` when the work dtype is float32 and a row holds a whole chunk, else 1
    (every term summed in float64)."""
    return CHUNK if compute_dtype(dtype) == torch.float32 and width >= CHUNK else 1


def _row_sums(a: torch.Tensor, main: int, out: torch.Tensor) -> torch.Tensor:
    """Float64 row sums of ``a`` [b, V] into ``out`` [b]: the first ``main`` entries (a
    multiple of CHUNK) as float32 sums of CHUNK entries added in float64, the rest in
    float64 (no tail pass when ``main`` is the whole row, e.g. V = 4,096)."""
    width = a.shape[1]
    if not main:
        return torch.sum(a, -1, dtype=torch.float64, out=out)
    torch.sum(a[:, :main].view(a.shape[0], -1, CHUNK).sum(-1), -1, dtype=torch.float64, out=out)
    if main < width:
        out += a[:, main:].sum(-1, dtype=torch.float64)
    return out


_OFFSETS: dict[str, torch.Tensor] = {}


def _offsets(device) -> torch.Tensor:
    """``arange(CHUNK)`` on ``device``, made once."""
    key = str(device)
    if key not in _OFFSETS:
        _OFFSETS[key] = torch.arange(CHUNK, device=device)
    return _OFFSETS[key]


def _max_and_first_argmax(r: torch.Tensor, main: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row max and the first index holding it, from the maxima of CHUNK-entry chunks of the
    first ``main`` entries (one cheap pass) and the tail's own max."""
    b, width = r.shape
    if not main:
        return r.max(-1)
    chunk_max = r[:, :main].reshape(b, -1, CHUNK).amax(-1)
    top, j = chunk_max.max(-1)  # the first chunk holding the main part's max
    idx = (j * CHUNK).unsqueeze(-1) + _offsets(r.device)
    first = idx.gather(-1, r.gather(-1, idx).argmax(-1, keepdim=True)).squeeze(-1)
    if main == width:
        return top, first
    tail_max, tail_at = r[:, main:].max(-1)
    later = tail_max > top  # a tie goes to the earlier (main) index, as torch.argmax
    return torch.where(later, tail_max, top), torch.where(later, tail_at + main, first)


@torch.no_grad()
def position_statistics(
    rows: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(log_probs, mean_log_prob, var_log_prob, top1)`` of each of the T positions of
    ``rows`` ([T, V] logits) at ``targets`` ([T] token ids): three float64 [T] tensors and
    the int64 argmax (the first one on ties, as ``torch.argmax``), on ``rows``' device."""
    if rows.dim() != 2 or targets.shape != rows.shape[:1]:
        raise ValueError(
            f"rows must be [T, V] and targets [T], got {tuple(rows.shape)} and "
            f"{tuple(targets.shape)}"
        )
    n, width = rows.shape
    dev = rows.device
    ct = compute_dtype(rows.dtype)
    lp = torch.empty(n, dtype=torch.float64, device=dev)
    mu, var = torch.empty_like(lp), torch.empty_like(lp)
    top1 = torch.empty(n, dtype=torch.long, device=dev)
    if n == 0:
        return lp, mu, var, top1
    whole = (width // CHUNK) * CHUNK  # entries in whole chunks (top-1 search)
    main = whole if summed_terms(width, rows.dtype) > 1 else 0  # float32 partial sums
    block = min(n, block_positions(width, dev))
    buf_x = torch.empty((block, width), dtype=ct, device=dev)  # x = r - m, then x - c
    buf_e = torch.empty_like(buf_x)  # e = exp(x)
    buf_t = torch.empty_like(buf_x)  # e x, then e (x - c)^2
    same = rows.dtype == ct
    # per position, float64: S, sum(e x), sum(e (x - c)^2) and the max; combined into
    # log p, mu and sigma^2 once after the sweep (fewer small operations per block)
    total, first, second = torch.empty_like(lp), torch.empty_like(lp), torch.empty_like(lp)
    top = torch.empty(n, dtype=rows.dtype, device=dev)
    for s in range(0, n, block):
        r = rows[s : s + block]
        b = r.shape[0]
        x, e, t = buf_x[:b], buf_e[:b], buf_t[:b]
        m, top1[s : s + b] = _max_and_first_argmax(r, whole)
        top[s : s + b] = m
        if same:
            torch.sub(r, m.unsqueeze(-1), out=x)
        else:  # bf16 / fp16: upcast first, then subtract in float32
            x.copy_(r)
            x.sub_(m.to(ct).unsqueeze(-1))
        torch.exp(x, out=e)
        tot = _row_sums(e, main, total[s : s + b])  # S >= 1 (the max's own term is exp(0))
        torch.mul(e, x, out=t)
        c = _row_sums(t, main, first[s : s + b]).div(tot).to(ct)  # E_p[x], work dtype
        x.sub_(c.unsqueeze(-1))  # x - c: the second moment about the mean
        torch.mul(e, x, out=t)
        t.mul_(x)
        _row_sums(t, main, second[s : s + b])
    log_z = total.log()
    # r_t - m in float64: exact, so log p(x_t) carries only log S's error
    tgt = rows.gather(-1, targets.unsqueeze(-1)).squeeze(-1).double()
    lp.copy_(tgt - top.double() - log_z)
    mu.copy_(first / total - log_z)  # E_p[x] - log S
    # E_p[(x - c)^2] = sigma^2 + (E_p[x] - c)^2; c is E_p[x] within (K + 1) u log V, so
    # the second term is below ((K + 1) u log V)^2 < 2e-10, second order, not subtracted
    var.copy_(second / total)
    return lp, mu, var, top1


__all__ = [
    "BLOCK_ELEMENTS",
    "CHUNK",
    "DEVICE_BLOCK_ELEMENTS",
    "U32",
    "block_positions",
    "compute_dtype",
    "position_statistics",
    "summed_terms",
]
