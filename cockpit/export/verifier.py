"""verify-export: is this export complete, honest and reloadable? (D22, D23)

This module owns ``verify_export(bag_dir)``, run at the end of every export and by the
``verify-export`` command. Each check reports on its own, failures named in words:

- bag valid: every payload and tag hash matches, nothing missing or extra (bagit);
- runs accounted for: every run of the plan copy is accepted, stopped with a reason,
  dropped by a decision, rejected or failed with a reason, or not run;
- metrics exported: each accepted run's metrics are in the bag (every file the
  manifest lists, at least one file of every source the plan declares: a TensorBoard
  run's event files and their scalars as JSON lines);
- telemetry minutes: ``data/telemetry/minutes.csv`` (the flight recording's minute
  aggregates) row by row, as many rows as the manifest declares, or the reason the
  manifest gives for there being none (:mod:`cockpit.export.minutes_csv`);
- expected ids: each accepted run's predictions hold exactly its expected ids;
- no empty file;
- no temporary paths: no text/JSON/YAML payload file points into /tmp, /var/tmp,
  $TMPDIR, /dev/shm or a pytest/mkdtemp folder outside the campaign's own folder
  (other absolute paths outside the bag are warnings);
- adapters pinned: an adapter carries its base model id and an exact revision;
- artifacts reload: each accepted artifact, as copied into the bag, reloads in a
  fresh process.

A bag is data: nothing read from it is executed or unpickled because it says so, and
nothing in it can hang or crash the verify: a FIFO, device or socket in the folder is
refused before any file is read (reading a FIFO blocks for ever), and every JSON file
of the bag is parsed by :func:`read_bag_json`, with the nesting bound of
:mod:`cockpit.common.safe_json` (a 100k-deep ``manifest.json`` is a named failure). Paths
it names are followed only to files of the bag (no symbolic link, nothing outside);
its ``reload.json`` commands and ``allow_unsafe_pickle`` flags are reported as refused,
and the artifacts are reloaded by the built-in worker with ``weights_only`` instead;
``trust_commands=True`` (``verify-export --trust-commands``) honours them.

The checks themselves live in ``export_checks`` (and ``temp_paths`` for the temporary
paths); this module runs them in order and holds the report.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cockpit.common.printable import printable
from cockpit.common.safe_json import loads_bounded
from cockpit.export.export_checks import (
    Check,
    adapters_pinned,
    artifacts_reload,
    bag_valid,
    expected_ids,
    metrics_exported,
    no_empty,
    runs_accounted,
)
from cockpit.export.fresh_venv import VenvOptions
from cockpit.export.minutes_csv import minutes_check
from cockpit.export.rebuild_check import REBUILD_TIMEOUT_S, environment_check, rebuild_check
from cockpit.export.temp_paths import no_temp_paths
from cockpit.runs.checkpoints.reload_check import verify_checkpoint

# A JSON file of a bag larger than this is not read (the export writes kilobytes).
JSON_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class VerifyExportReport:
    bag: str
    checks: list[Check] = field(default_factory=list)
    reload_checked: bool = True

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def failures(self) -> list[str]:
        return [f"{c.name}: {f}" for c in self.checks for f in c.failures]

    @property
    def warnings(self) -> list[str]:
        return [f"{c.name}: {w}" for c in self.checks for w in c.warnings]

    @property
    def refused(self) -> list[str]:
        """What the bag asked for and was not done (a bag is data)."""
        return [r for c in self.checks for r in c.refused]

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"bag": self.bag, "ok": self.ok, "reload_checked": self.reload_checked,
                "failures": self.failures, "warnings": self.warnings,
                "refused": self.refused,
                "checks": [{"name": c.name, "ok": c.ok, "failures": list(c.failures),
                            "warnings": list(c.warnings), "refused": list(c.refused),
                            "detail": c.detail}
                           for c in self.checks]}

    def render(self, indent: str = "") -> str:
        head = "verified" if self.ok else "NOT verified"
        lines = [f"{indent}verify-export {self.bag}: {head}"]
        for c in self.checks:
            mark = "ok  " if c.ok else "FAIL"
            lines.append(f"{indent}  [{mark}] {c.name}" + (f" — {c.detail}" if c.detail else ""))
            lines += [f"{indent}         {f}" for f in c.failures]
            lines += [f"{indent}         refused: {r}" for r in c.refused]
            lines += [f"{indent}         warning: {w}" for w in c.warnings[:10]]
            if len(c.warnings) > 10:
                lines.append(f"{indent}         ... and {len(c.warnings) - 10} more warnings")
        # Messages name files read from the bag or the tar (untrusted names): printable.
        return "\n".join(printable(line, 2000) for line in lines)


def find_bag(path: Path) -> Path:
    """The bag itself, given the bag or the export root that holds it."""
    if (path / "bagit.txt").is_file():
        return path
    info = path / "export.json"
    if info.is_file():
        doc, _why = read_bag_json(info)
        name = doc.get("bag") if isinstance(doc, dict) else None
        if isinstance(name, str) and (path / name / "bagit.txt").is_file():
            return path / name
    inner = [p for p in path.iterdir() if (p / "bagit.txt").is_file()] if path.is_dir() else []
    return inner[0] if len(inner) == 1 else path


def verify_export(bag_dir: str | os.PathLike[str], *, reload: bool = True,
                  verifier: Callable[..., Any] = verify_checkpoint,
                  campaign_folder: str | os.PathLike[str] | None = None,
                  trust_commands: bool = False,
                  trusted: list[dict[str, Any]] | None = None,
                  rebuild: bool = False,
                  rebuild_timeout_s: float = REBUILD_TIMEOUT_S,
                  fresh_venv: VenvOptions | None = None) -> VerifyExportReport:
    """Check an export; ``report.ok`` only when every check passes.

    ``trust_commands``: run the custom reload commands and honour the unsafe-unpickling
    flags that the bag's ``reload.json`` asks for (never by default). ``trusted``: the
    reload recipes the export just wrote from the campaign file, used in place of the
    bag's (the export's own verification). ``rebuild``: run the bag's reload.py (its
    code, as you); ``fresh_venv``: in a new virtual environment holding the bag's
    requirements.txt."""
    bag = find_bag(Path(bag_dir).resolve())
    report = VerifyExportReport(str(bag), reload_checked=reload)
    special = special_files(bag)
    if special:
        # Nothing else is read: opening a FIFO blocks, a device may never end.
        report.checks.append(Check("bag valid", False, tuple(special)))
        report.reload_checked = False
        return report
    data = bag / "data"
    manifest, manifest_why = read_bag_json(data / "manifest.json")
    reload_doc, reload_why = read_bag_json(data / "reload.json")
    report.checks.append(bag_valid(bag))
    if not isinstance(manifest, dict):
        report.checks.append(Check("runs accounted for", False, (
            f"data/manifest.json {manifest_why or 'is not a JSON object'}",)))
        manifest = {}
    else:
        report.checks.append(runs_accounted(bag, manifest))
    report.checks.append(metrics_exported(bag, manifest))
    report.checks.append(minutes_check(bag, manifest))
    report.checks.append(expected_ids(bag, manifest))
    report.checks.append(no_empty(bag))
    folder = campaign_folder or manifest.get("campaign_folder")
    report.checks.append(no_temp_paths(bag, Path(folder) if folder else None))
    entries = reload_doc.get("artifacts", []) if isinstance(reload_doc, dict) else []
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    report.checks.append(adapters_pinned(manifest, entries))
    reloads = artifacts_reload(bag, manifest, entries, reload, verifier,
                               trust_commands=trust_commands, trusted=trusted)
    if reload_why and (data / "reload.json").exists():
        reloads = replace(reloads, ok=False, failures=(
            f"data/reload.json {reload_why}",) + reloads.failures)
    report.checks.append(reloads)
    report.checks.append(environment_check(bag))
    if rebuild:
        report.checks.append(rebuild_check(bag, manifest, entries, report.checks[0].ok,
                                           rebuild_timeout_s, fresh_venv))
    return report


def read_bag_json(path: Path) -> tuple[Any, str | None]:
    """(the parsed JSON, None) or (None, why not, in words): a file of a bag is read with
    a size and nesting bound, never into a RecursionError."""
    try:
        # Never through a link, never blocking on a FIFO: a regular file or nothing.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, "is missing"
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "is not a regular file: not read"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(JSON_MAX_BYTES + 1)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if len(raw) > JSON_MAX_BYTES:
        return None, f"is larger than {JSON_MAX_BYTES >> 20} MiB: not read"
    try:
        return loads_bounded(raw.decode("utf-8")), None
    except RecursionError:  # pragma: no cover - the bound comes first
        return None, "is nested too deeply: not read"
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"is not valid JSON: {printable(str(exc), 200)}"


def special_files(bag: Path, limit: int = 20) -> list[str]:
    """Entries of the bag folder that are neither files nor folders, nor links to one
    (bag valid names links): FIFOs, sockets, devices, links to them. None is opened."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(bag, followlinks=False):
        for entry in (*dirnames, *filenames):
            path = Path(dirpath) / entry
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            link = stat.S_ISLNK(mode)
            if link:
                try:
                    mode = os.stat(path).st_mode  # what it points at (stat never blocks)
                except OSError:
                    continue  # a dangling link: bag valid names it
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                continue
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) \
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special"
            kind = f"a symbolic link to {kind}" if link else kind
            found.append(f"{printable(path.relative_to(bag).as_posix(), 200)} is {kind}: an "
                         "export holds files and folders only; nothing was read")
            if len(found) >= limit:
                return found
    return found
