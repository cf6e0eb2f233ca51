"""verify-export: is this export complete, honest and reloadable? (D22, D23)

This module owns ``verify_export(bag_dir)``, run at the end of every export and by the
``verify-export`` command. Each check reports on its own, failures named in words:

- bag valid: every payload and tag hash matches, nothing missing or extra (bagit);
- runs accounted for: every run of the plan copy is accepted, stopped with a reason,
  dropped by a decision, rejected or failed with a reason, or not run;
- expected ids: each accepted run's predictions hold exactly its expected ids;
- no empty file;
- no temporary paths: no text/JSON/YAML payload file points into /tmp, /var/tmp,
  $TMPDIR, /dev/shm or a pytest/mkdtemp folder outside the campaign's own folder
  (other absolute paths outside the bag are warnings);
- adapters pinned: an adapter carries its base model id and an exact revision;
- artifacts reload: each accepted artifact, as copied into the bag, reloads in a
  fresh process.

A bag is data: nothing read from it is executed or unpickled because it says so. Paths
it names are followed only to files of the bag (no symbolic link, nothing outside);
its ``reload.json`` commands and ``allow_unsafe_pickle`` flags are reported as refused,
and the artifacts are reloaded by the built-in worker with ``weights_only`` instead;
``trust_commands=True`` (``verify-export --trust-commands``) honours them.

The checks themselves live in ``export_checks`` (and ``temp_paths`` for the temporary
paths); this module runs them in order and holds the report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.export.export_checks import (
    Check,
    adapters_pinned,
    artifacts_reload,
    bag_valid,
    expected_ids,
    no_empty,
    runs_accounted,
)
from cockpit.export.rebuild_check import REBUILD_TIMEOUT_S, environment_check, rebuild_check
from cockpit.export.temp_paths import no_temp_paths
from cockpit.printable import printable
from cockpit.runs.reload_check import verify_checkpoint


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
        try:
            name = json.loads(info.read_text()).get("bag")
        except (OSError, ValueError, AttributeError):
            name = None
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
                  rebuild_timeout_s: float = REBUILD_TIMEOUT_S) -> VerifyExportReport:
    """Check an export; ``report.ok`` only when every check passes.

    ``trust_commands``: run the custom reload commands and honour the unsafe-unpickling
    flags that the bag's ``reload.json`` asks for (never by default). ``trusted``: the
    reload recipes the export just wrote from the campaign file, used in place of the
    bag's (the export's own verification)."""
    bag = find_bag(Path(bag_dir).resolve())
    report = VerifyExportReport(str(bag), reload_checked=reload)
    data = bag / "data"
    manifest = _load_json(data / "manifest.json")
    reload_doc = _load_json(data / "reload.json")
    report.checks.append(bag_valid(bag))
    if not isinstance(manifest, dict):
        report.checks.append(Check("runs accounted for", False,
                                   ("data/manifest.json is missing or unreadable",)))
        manifest = {}
    else:
        report.checks.append(runs_accounted(bag, manifest))
    report.checks.append(expected_ids(bag, manifest))
    report.checks.append(no_empty(bag))
    folder = campaign_folder or manifest.get("campaign_folder")
    report.checks.append(no_temp_paths(bag, Path(folder) if folder else None))
    entries = reload_doc.get("artifacts", []) if isinstance(reload_doc, dict) else []
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    report.checks.append(adapters_pinned(manifest, entries))
    report.checks.append(artifacts_reload(bag, manifest, entries, reload, verifier,
                                          trust_commands=trust_commands, trusted=trusted))
    report.checks.append(environment_check(bag))
    if rebuild:
        report.checks.append(rebuild_check(bag, manifest, entries, report.checks[0].ok,
                                           rebuild_timeout_s))
    return report


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
