"""`cockpit init DIR [--framework hf|lightning|plain]`: write a complete, commented
campaign to start from.

This module owns the init command: validating its input (the target folder must not
already hold a campaign, ``--offer`` must be an id of the built-in catalog, ``--start``
``now`` or an ISO-8601 time with a timezone, ``--framework`` one of :data:`FRAMEWORKS`),
copying the template that travels in the package (read through importlib.resources)
with the campaign id, offer and window start filled in, and telling a newcomer what
was written and which commands come next. The template itself is the documentation:
it runs end to end as written, and every section says what it is for.

The templates live in ``cockpit/assets/templates``: ``init`` is the plain one (a PyTorch
loop with ``cockpit.report`` and ``cockpit.resume``); a framework's is ``init`` with the
framework's own folder laid over it (``init_hf``: the Hugging Face Trainer,
``init_lightning``: PyTorch Lightning): a file in both is the framework's, a file only in
``init`` is shared (Lightning's model and error analysis are the plain ones).
"""

from __future__ import annotations

import argparse
import re
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.assets import asset
from cockpit.campaign.catalog import BUILTIN_OFFERS
from cockpit.common.errors import InputError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

TEMPLATES = "templates"
BASE = "init"  # the plain template; a framework's folder is laid over it
# --framework -> the folder laid over the base (None: the base alone)
FRAMEWORKS: dict[str, str | None] = {"plain": None, "hf": "init_hf",
                                     "lightning": "init_lightning"}
CAMPAIGN_FILE = "campaign.yaml"
# Files whose presence means DIR already holds a campaign: init never overwrites them.
GUARDED = (CAMPAIGN_FILE, "train.py")
CAMPAIGN_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
PLACEHOLDERS = ("{{campaign}}", "{{offer}}", "{{start}}")


def parse_framework(framework: str) -> str:
    if framework not in FRAMEWORKS:
        raise InputError(f"init: unknown --framework {framework!r}; known frameworks: "
                         f"{', '.join(sorted(FRAMEWORKS))}")
    return framework


def _folder_files(name: str) -> dict[str, Traversable]:
    folder = asset(TEMPLATES, name)
    if not folder.is_dir():
        raise InputError(f"init: the campaign template is missing from the installed "
                         f"cockpit ({folder}); reinstall it")
    return {f.name: f for f in folder.iterdir()
            if f.is_file() and not f.name.startswith(".") and not f.name.endswith(".pyc")}


def template_files(framework: str = "plain") -> list[Traversable]:
    """The template's files (plain files only, sorted by name; caches skipped): the
    base's, with the framework's folder laid over them."""
    files = _folder_files(BASE)
    overlay = FRAMEWORKS[parse_framework(framework)]
    if overlay is not None:
        files.update(_folder_files(overlay))
    return [files[name] for name in sorted(files)]


def parse_offer(offer: str) -> str:
    if offer not in BUILTIN_OFFERS:
        known = ", ".join(BUILTIN_OFFERS)
        raise InputError(f"init: unknown offer {offer!r}; known offers: {known} "
                         "(another offer can be added under offers: in campaign.yaml)")
    return offer


def parse_start(text: str, now: datetime | None = None) -> str:
    """``now`` or an ISO-8601 time with a timezone, as the campaign file writes it."""
    value = text.strip()
    if value.lower() == "now":
        when = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    else:
        try:
            when = datetime.fromisoformat(value[:-1] + "+00:00"
                                          if value.endswith(("Z", "z")) else value)
        except ValueError:
            raise InputError(f"init: --start {text!r} is not a time like "
                             "2026-12-02T08:00:00Z (or: now)") from None
        if when.tzinfo is None:
            raise InputError(f"init: --start {text!r} has no timezone "
                             "(add Z for UTC, or +02:00)")
    if when.utcoffset() == timezone.utc.utcoffset(None):
        return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return when.isoformat()


def campaign_id(folder: Path) -> str:
    """An id the campaign file accepts, from the folder's name (``my-campaign`` if none)."""
    words = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._")
    return words if words and CAMPAIGN_ID.fullmatch(words) else "my-campaign"


def _refuse_existing(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise InputError(f"init: {folder} exists and is not a folder")
    for name in GUARDED:
        path = folder / name
        if path.exists() or path.is_symlink():
            raise InputError(f"init: {path} already exists; init never overwrites a "
                             "campaign (give a new folder, or remove the file first)")


def write_template(folder: Path, offer: str, start: str,
                   framework: str = "plain") -> list[Path]:
    """Copy the template into ``folder`` with the placeholders filled; the paths written."""
    files = template_files(framework)
    _refuse_existing(folder)
    clashes = [folder / f.name for f in files if (folder / f.name).exists()]
    if clashes:
        names = ", ".join(str(p) for p in clashes)
        raise InputError(f"init: {names} already exist(s); init never overwrites a file "
                         "(give a new folder, or remove them first)")
    folder.mkdir(parents=True, exist_ok=True)
    values = {"{{campaign}}": campaign_id(folder), "{{offer}}": offer, "{{start}}": start}
    written: list[Path] = []
    for source in files:
        target = folder / source.name
        if source.name == CAMPAIGN_FILE:
            text = source.read_text(encoding="utf-8")
            for key in PLACEHOLDERS:
                text = text.replace(key, values[key])
            target.write_text(text, encoding="utf-8")
        else:
            target.write_bytes(source.read_bytes())
        written.append(target)
    return written


def next_steps(folder: Path) -> list[tuple[str, str]]:
    """What a newcomer does next and the command for it (paths from the current folder)."""
    try:
        shown = folder.relative_to(Path.cwd())
    except ValueError:
        shown = folder
    file = shlex.quote(str(shown / CAMPAIGN_FILE))
    return [
        ("validate it: prints ok, with no warning", f"cockpit check {file}"),
        ("the schedule: does it fit the window? (D7, D11)", f"cockpit plan {file}"),
        ("run the stages; exits 3 at the pilot's decision point (D4)",
         f"cockpit headless {file} --auto --until-done"),
        ("decide (continue, limit or revise) with your reason",
         f'cockpit decide {file} continue --stage pilot --note "why"'),
        ("run on to the verified export (exit 0)",
         f"cockpit headless {file} --auto --until-done"),
        ("or all of it on screen, in the cockpit (press d to decide)", f"cockpit {file}"),
    ]


def run_init(args: argparse.Namespace) -> int:
    """The ``init`` command: returns the exit code; bad input raises InputError."""
    offer = parse_offer(args.offer)
    start = parse_start(args.start)
    framework = parse_framework(args.framework)
    folder = Path(args.dir).expanduser().resolve()
    written = write_template(folder, offer, start, framework)
    trained = "" if framework == "plain" else f", {framework} training script"
    print(f"wrote a campaign to {folder} (offer {offer}, window starting {start}{trained}):")
    print("  " + "  ".join(path.name for path in written))
    if BUILTIN_OFFERS[offer].price is None:
        print(f"note: the catalog gives no price for {offer} (D10): state the package price "
              "under offers: in campaign.yaml")
    print("Read campaign.yaml first: every section says what it is for. Then:")
    for why, command in next_steps(folder):
        print(f"  # {why}\n  {command}")
    return 0
