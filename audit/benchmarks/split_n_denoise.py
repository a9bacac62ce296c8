"""``privacy-audit bench split-n-denoise``: the SnD client's cost (token noise plus the
denoiser) against the server's forward pass of the frozen MiniLM encoder, same batch.

Cases: ``server-forward`` (reference: the frozen encoder on the noisy embeddings,
mean pooled), ``client-noise`` (embedding lookup, dχ noise, clipping), ``client-denoiser``
(the denoiser the bundled config trains: d_model 64, 2 layers), ``client-total`` (both),
and ``client-denoiser-paper-size`` (a denoiser at the encoder's width, 6 layers, like the
paper's Table 8). Weights of the denoisers are untrained: the cost does not depend on them.
"""

from __future__ import annotations

import numpy as np
import torch

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, ratios_to, time_cases


def run(settings: BenchSettings) -> BenchResult:
    from transformers import AutoModel, AutoTokenizer

    from privacy_audit import fixtures
    from privacy_audit.defenses.snd_noise import privatize
    from privacy_audit.defenses.split_n_denoise import Denoiser, SplitEncoder
    from privacy_audit.targets.loading import minilm_path

    batch, seq = (4, 16) if settings.quick else (32, 64)
    path = str(minilm_path())
    split = SplitEncoder(
        AutoModel.from_pretrained(path, local_files_only=True),
        AutoTokenizer.from_pretrained(path, local_files_only=True),
        seq,
        "mean",
    )
    texts = [r["text"] for r in fixtures.load_corpus("private")[:batch]]
    ids, mask = split.tokenize(texts)
    clip = float(np.linalg.norm(split.vocab, axis=1).max())
    rng = np.random.default_rng(settings.seed)
    eta = 100.0

    def noise():
        x = split.local_embed(ids)
        noisy, z = privatize(x[mask], eta, clip, rng)
        xt = np.zeros_like(x)
        zz = np.zeros_like(x)
        xt[mask], zz[mask] = noisy, z
        return xt, zz

    xt, zz = noise()
    e_n = split.server_forward(xt, mask)
    torch.manual_seed(settings.seed)
    small = Denoiser(split.dim, 64, 2, 4, 128, seq).eval()
    paper = Denoiser(split.dim, split.dim, 6, 6, split.dim, seq).eval()
    t = {
        "e_n": torch.as_tensor(e_n),
        "xt": torch.as_tensor(xt),
        "z": torch.as_tensor(zz),
        "mask": torch.as_tensor(mask),
    }

    def denoise(model):
        with torch.no_grad():
            model(t["e_n"], t["xt"], t["z"], t["mask"])

    def total():
        a, b = noise()
        with torch.no_grad():
            small(t["e_n"], torch.as_tensor(a), torch.as_tensor(b), t["mask"])

    timings = time_cases(
        {
            "server-forward": lambda: split.server_forward(xt, mask),
            "client-noise": noise,
            "client-denoiser": lambda: denoise(small),
            "client-total": total,
            "client-denoiser-paper-size": lambda: denoise(paper),
        },
        settings.repeats,
        settings.warmup,
    )
    return BenchResult(
        name="split-n-denoise",
        reference="server-forward",
        cases={k: v.summary() for k, v in timings.items()},
        ratios=ratios_to(timings, "server-forward"),
        setup={
            "model": "all-MiniLM-L6-v2 (frozen server encoder, mean pooling)",
            "batch_size": batch,
            "tokens": int(mask.sum()),
            "padded_length": int(mask.shape[1]),
            "eta": eta,
            "denoiser": "d_model 64, 2 layers, 4 heads",
            "paper_size_denoiser": f"d_model {split.dim}, 6 layers, 6 heads",
        },
        notes=[
            "client-total is what the client runs per query besides the embedding lookup; "
            "the ratio says what share of a local forward pass the client still pays.",
        ],
    )
