"""One rule for every command that writes: no output is one of its inputs or another output.

``export-risky r.json --out r.json`` used to replace a 50 KB results file with 33 bytes,
and ``--out report.html`` the run's report; only ``gate`` checked its outputs. Every writer
(``run``, ``epsilon``, ``score``, ``gate``, ``export-risky``, ``dataset-inference``,
``canaries make|audit``, ``compare``, ``claims``, ``experiment``, ``bench``) now calls
:func:`check_outputs` with the files it will write and the files and directories it reads,
before any work or write. An output is refused (exit 2, one line) when it

- resolves to an input file (through any symlink) or is a hard link of one (same device
  and inode), or of any file inside an input directory;
- already exists inside an input directory (it would overwrite part of a model or dataset);
- is an output directory that holds an input (``canaries make`` rewrites ``--out/tokenizer``);
- names the same file as another output.

``tests/end_to_end/test_outputs.py`` enumerates the command line's commands: a new command with an
output option fails that test until it calls this helper.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from privacy_audit.ground.errors import AuditError

#: how many files of an input directory are checked for hard links (model folders hold a few)
_MAX_DIR_FILES = 10_000
#: files a results.json's run wrote beside it: writing over them loses that run's outputs
RUN_SIBLINGS = ("report.html", "results.json", "run.log")

Named = Iterable[tuple[str, "str | Path | None"]]


def _resolved(p: Path) -> Path:
    try:
        return p.expanduser().resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(p))


def _inode(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _dir_inodes(d: Path) -> dict[tuple[int, int], Path]:
    out: dict[tuple[int, int], Path] = {}
    for root, _, names in os.walk(d):
        for n in names:
            f = Path(root) / n
            ino = _inode(f)
            if ino is not None:
                out[ino] = f
            if len(out) >= _MAX_DIR_FILES:
                return out
    return out


def results_family(results: str | Path | None) -> list[tuple[str, Path]]:
    """A results file and, when it is a run's ``results.json``, the run's other outputs
    beside it (its report, its log): inputs a writer must not replace."""
    if results is None:
        return []
    p = Path(results)
    out = [("the results file", p)]
    if p.name == "results.json":
        for name in RUN_SIBLINGS:
            q = p.with_name(name)
            if q.name != p.name and q.exists():
                out.append((f"that run's {name}", q))
    return out


def check_outputs(outputs: Named, inputs: Named = (), output_dirs: Named = ()) -> None:
    """Refuse (``AuditError``: exit 2, one line) an output that would overwrite an input or
    another output; see the module doc. ``outputs``: ``(option, file)`` pairs, the files the
    command writes; ``inputs``: ``(what, file or directory)`` pairs it reads;
    ``output_dirs``: ``(option, directory)`` pairs it rewrites as a whole. ``None`` paths
    (an option not given) are skipped."""
    outs = [(o, Path(p)) for o, p in outputs if p is not None]
    ins = [(w, Path(p)) for w, p in inputs if p is not None]
    odirs = [(o, Path(p)) for o, p in output_dirs if p is not None]
    files: list[tuple[str, Path, Path, tuple[int, int] | None]] = []
    dirs: list[tuple[str, Path, Path, dict]] = []
    for what, p in ins:
        if p.is_dir():
            dirs.append((what, p, _resolved(p), _dir_inodes(p)))
        else:
            files.append((what, p, _resolved(p), _inode(p)))
    seen: list[tuple[str, Path, Path, tuple[int, int] | None]] = []
    for option, o in outs:
        ro, io_ = _resolved(o), _inode(o)
        for what, p, rp, ip in files:
            if ro == rp or (io_ is not None and io_ == ip):
                how = "" if ro == rp and str(o) == str(p) else " (the same file by a link)"
                raise AuditError(
                    f"{option} {str(o)!r} is {what} {str(p)!r}{how}; writing it would "
                    "overwrite an input"
                )
        for what, p, rp, inodes in dirs:
            inside = rp == ro or rp in ro.parents
            if (inside and o.exists()) or (io_ is not None and io_ in inodes):
                f = inodes.get(io_, o) if io_ is not None else o
                raise AuditError(
                    f"{option} {str(o)!r} is the file {str(f)!r} of {what} {str(p)!r}; "
                    "writing it would overwrite an input"
                )
        for option2, o2, r2, i2 in seen:
            if ro == r2 or (io_ is not None and io_ == i2):
                raise AuditError(
                    f"{option2} {str(o2)!r} and {option} {str(o)!r} name the same file; "
                    "outputs must name different files"
                )
        seen.append((option, o, ro, io_))
    for option, d in odirs:
        rd = _resolved(d)
        for what, p, rp, _ in files + [(w, p, r, None) for w, p, r, _ in dirs]:
            if rp == rd or rd in rp.parents:
                raise AuditError(
                    f"{option} {str(d)!r} holds {what} {str(p)!r}; writing it would "
                    "overwrite an input"
                )


def dir_outputs(option: str, directory: str | Path | None, names: Iterable[str]):
    """``(option, directory/name)`` for each file a command writes into a directory."""
    if directory is None:
        return []
    return [(f"{option} file", Path(directory) / n) for n in names]


#: config keys and the flags of the one-line commands that set them
FLAGS = {
    "data.members": "--members",
    "data.nonmembers": "--nonmembers",
    "data.test": "--test",
    "target.audit_dir": "--model",
    "target.adapter_dir": "--adapter",
    "target.reference_dir": "--reference",
}


def config_input_paths(cfg, flags: bool = False) -> list[tuple[str, str]]:
    """``(what, path)`` of every file and directory a config reads (its own file too);
    ``flags``: name them by the one-line command's flags where one sets them."""
    from privacy_audit.audit.scale.fingerprint import config_inputs

    out = []
    src = Path(str(cfg.source))
    if src.is_file():
        out.append(("the config file", str(src)))
    for key, path in config_inputs(cfg).items():
        what = FLAGS.get(key, key) if flags else key
        if key.startswith("target.reference_dirs[") and flags:
            what = "--reference"
        out.append((what, path))
    return out
