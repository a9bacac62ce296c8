"""dp-check's sampling and accounting findings: the data loader's real scheme, rate and
steps against the claim's, and the ε of the claim's own declared parameters.

The accountant's ε holds for the scheme it assumes (Poisson: every example in every step
independently with probability q), at the sampling rate and the number of steps it is
given; the loader is driven over the claimed schedule (:mod:`.sampling`) to see all
three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privacy_audit.audit.epsilon.dp_check import accounting
from privacy_audit.audit.epsilon.dp_check.contract import Claim
from privacy_audit.audit.epsilon.dp_check.finding import Finding, Ledger, eps_view


@dataclass
class Drive:
    """What driving the data loader showed, beside the claim's declared steps.

    ``samp`` is the sampling record, ``scheme`` the scheme found (None when the loader was
    not driven), ``spe_list`` the steps of each epoch and ``spe`` the largest,
    ``t_driven`` the logical steps counted, ``standin`` whether make_dataset() has another
    size than the claim's training set (its rate and steps are then the declared ones),
    ``t_declared`` the steps the claim accounts for (``t_how`` says how), ``t_run`` the
    steps the run takes and ``rate`` the measured sampling rate (None when untested)."""

    samp: dict[str, Any]
    scheme: str | None
    spe_list: list[int]
    spe: int
    t_driven: int
    n_data: int | None
    standin: bool
    t_declared: int
    t_how: str
    t_run: int
    rate: dict[str, Any] | None


def declared_steps(
    claim: Claim, samp: dict[str, Any], spe_list: list[int], standin: bool
) -> tuple[int, str]:
    """The steps the claim accounts for and how they were found: CLAIM['steps'], else
    epochs × the loader's steps per epoch (what Opacus's accountant counts; not for a
    stand-in dataset), else round(epochs / sample_rate)."""
    q_d = claim.sample_rate
    full_epochs = [x for x in spe_list if x] if samp.get("tested") else []
    if claim.steps is not None:
        t_declared, t_how = claim.steps, "CLAIM['steps']"
    elif full_epochs and not standin:
        t_declared = claim.epochs * max(full_epochs)
        t_how = "epochs × the loader's steps per epoch (what Opacus's accountant counts)"
    else:
        t_declared, t_how = (
            max(1, round(claim.epochs / q_d)),
            "round(epochs / sample_rate)",
        )
    return t_declared, t_how


def sampling_findings(raw: dict[str, Any], claim: Claim, led: Ledger) -> Drive:
    """The sampling check: passed when the loader was driven, with a deviation when its
    scheme is not the claim's; untested without a loader. Returns what the drive showed
    (:class:`Drive`); a truncated drive runs the claimed epochs (or steps) in full."""
    samp = raw["sampling"]
    scheme = samp.get("scheme") if samp.get("tested") else None
    spe_list = samp.get("steps_per_epoch") or []
    spe = max(spe_list) if spe_list else 0
    t_driven = int(samp.get("logical_steps", 0))
    n_data = raw["info"].get("dataset_size")
    standin = claim.dataset_size is not None and n_data is not None and claim.dataset_size != n_data
    t_declared, t_how = declared_steps(claim, samp, spe_list, standin)
    if samp.get("tested"):
        led.status["sampling"] = "passed"
        t_run = (
            spe * samp["epochs_wanted"]
            if samp.get("truncated") and claim.epochs
            else (claim.steps if samp.get("truncated") and claim.steps else t_driven)
        )
        if scheme != claim.sampling:
            sev = "deviation"
            led.status["sampling"] = "inconclusive"
            led.findings.append(
                Finding(
                    "sampling",
                    f"sampling: {scheme} accounted as {claim.sampling}",
                    sev,
                    f"the data loader's batches are '{scheme}', the claim assumes '{claim.sampling}'",
                    samp.get("why", scheme or ""),
                    f"'{claim.sampling}' sampling"
                    + (
                        " (every example in every step independently with probability q)"
                        if claim.sampling == "poisson"
                        else ""
                    ),
                    "the data loader: Opacus's make_private(poisson_sampling=True) replaces it with "
                    "a Poisson sampler; a DataLoader with shuffle or a plain batch sampler is not one",
                )
            )
        rate = samp.get("rate")
    else:
        t_run = t_declared
        rate = None
        led.why_untested.setdefault(
            "sampling", "no data loader to drive (privatize: define make_dataset and make_loader)"
        )
    return Drive(
        samp, scheme, spe_list, spe, t_driven, n_data, standin, t_declared, t_how, t_run, rate
    )


def declared_accounting(claim: Claim, drive: Drive, led: Ledger) -> dict[str, Any]:
    """The accounting record of the claim and its declared σ, q, T: dp-accounting's PLD
    interval (and RDP beside it, add-remove only; the shuffle lower bound under shuffle),
    with a deviation when the declared parameters' ε already exceeds the claim. Marks the
    accounting check passed."""
    sigma_d, q_d = claim.noise_multiplier, claim.sample_rate
    t_declared, t_how, spe = drive.t_declared, drive.t_how, drive.spe
    acc: dict[str, Any] = {
        "claimed": {"epsilon": claim.epsilon, "delta": claim.delta},
        "declared": {"sigma": sigma_d, "q": q_d, "steps": t_declared, "steps_how": t_how},
    }
    dec = accounting.poisson_interval(
        sigma_d,
        q_d,
        max(1, t_declared),
        claim.delta,
        decide_against=claim.epsilon,
        relation=claim.adjacency,
    )
    acc["declared"]["epsilon_pld"] = dec.as_dict()
    try:
        acc["declared"]["epsilon_rdp"] = (
            accounting.rdp_epsilon(sigma_d, q_d, max(1, t_declared), claim.delta)
            if claim.adjacency == "add-remove"
            else None
        )
    except Exception:  # RDP can fail to converge at extreme parameters; it is a side value
        acc["declared"]["epsilon_rdp"] = None
    led.status["accounting"] = "passed"
    if claim.sampling == "poisson" and dec.lower > claim.epsilon:
        # the declared numbers disagree with the printed ε: a violation when the measured
        # mechanism also exceeds the claim (below), else the numbers are to be checked
        led.findings.append(
            Finding(
                "accounting",
                "accounting: the claim is below its own parameters' ε",
                "deviation",
                f"σ = {sigma_d:g}, q = {q_d:.4g}, T = {t_declared} give ε ≥ {dec.lower:.4g}, "
                f"more than the claimed {claim.epsilon:g}",
                f"dp-accounting PLD: ε ∈ [{dec.lower:.4g}, {dec.upper:.4g}] at δ = {claim.delta:g}"
                + (f" ({claim.adjacency})" if claim.adjacency != "add-remove" else ""),
                f"ε ≤ {claim.epsilon:g}",
                "the accountant call: its δ, steps, sampling rate and neighbouring relation must be "
                "the ones the run uses",
                eps_view(dec.lower, "sound lower bound", dec.how),
            )
        )
    if claim.sampling == "shuffle":
        lb_shuffle = accounting.shuffle_lower_bound(
            sigma_d, max(1, spe or round(1 / q_d)), claim.epochs or 1, claim.delta
        )
        acc["declared"]["epsilon_shuffle_lower"] = lb_shuffle
    return acc


def run_findings(claim: Claim, drive: Drive, measured: dict[str, Any], led: Ledger) -> None:
    """The run against the declared rate and steps: the measured rate (its Clopper–Pearson
    interval at 5e-4 into ``measured["q"]``, and a deviation when it excludes the declared
    q), a note for a stand-in dataset, and a deviation when the run takes more steps than
    the claim accounts for."""
    q_d = claim.sample_rate
    samp, scheme, rate, standin = drive.samp, drive.scheme, drive.rate, drive.standin
    n_data, t_run, t_declared, t_how = drive.n_data, drive.t_run, drive.t_declared, drive.t_how
    if rate:
        measured["q"] = rate
        if claim.sampling == "poisson" and scheme == "poisson" and not standin:
            from privacy_audit.audit.epsilon.dp_check.sampling import clopper_pearson

            lo_w, hi_w = clopper_pearson(samp["inclusions"], rate["trials"], 5e-4)
            measured["q"]["consistent_interval"] = [lo_w, hi_w]
            if lo_w > q_d:
                led.status["accounting"] = (
                    "violated" if led.status["accounting"] == "violated" else "inconclusive"
                )
                led.findings.append(
                    Finding(
                        "accounting",
                        "accounting: sampling rate larger than declared",
                        "deviation",
                        f"examples are drawn at q̂ = {rate['estimate']:.4g}, the claim says {q_d:.4g}",
                        f"q̂ = {rate['estimate']:.4g} [{rate['lower']:.4g}, {rate['upper']:.4g}] "
                        f"({samp['inclusions']:,} draws of {rate['trials']:,})",
                        f"q = {q_d:.4g}",
                        "the sample rate given to the accountant and the noise calibration: it "
                        "must be batch size / the size of the dataset the loader draws from",
                    )
                )
    if standin:
        led.findings.append(
            Finding(
                "sampling",
                "sampling: a stand-in dataset",
                "info",
                f"make_dataset() has {n_data} examples, the claim's training set "
                f"{claim.dataset_size}: the loader's scheme is tested, its rate and steps are "
                "the declared ones",
                f"{n_data} examples",
                f"{claim.dataset_size} examples (CLAIM['dataset_size'])",
                "",
            )
        )
    if samp.get("tested") and t_run > t_declared and not standin:
        led.status["accounting"] = (
            "violated" if led.status["accounting"] == "violated" else "inconclusive"
        )
        led.findings.append(
            Finding(
                "accounting",
                "accounting: more steps than accounted",
                "deviation",
                f"the run takes {t_run} steps, the claim accounts for {t_declared}",
                f"{t_run} logical steps over {samp['epochs_wanted']} epoch(s)",
                f"T = {t_declared} ({t_how})",
                "the steps given to the accountant and the noise calibration must be the whole "
                "run's (epochs × steps per epoch), not one epoch's",
            )
        )
