"""What `cockpit check` finds in the runs' metrics and checkpoint sources (issue 22).

Blind rules start here: a metrics source whose reader needs an extra that is not
installed reads nothing all campaign long (an error, with the install command), and a
metrics or checkpoint folder that is not the one the stage's command names (``--logdir
X`` while the run declares ``metrics: Y``) is watched in vain (a warning). Each finding
carries the campaign file key path it is about, so the caller can locate it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from cockpit.campaign.model import Campaign
from cockpit.campaign.yamlread import KeyPath
from cockpit.runs.metrics.tensorboard import TENSORBOARD_INSTALL, is_tensorboard_path

# Folder names that hold TensorBoard event files by convention (Lightning, HF, Keras).
TB_FOLDER_NAMES = frozenset({"tb", "tensorboard", "tb_logs", "tblogs", "lightning_logs"})

# A command's flags that name a folder, by what the campaign file declares for it.
FOLDER_FLAGS: dict[str, str] = {
    **dict.fromkeys(("--logdir", "--log-dir", "--log_dir", "--metrics", "--metrics-dir",
                     "--metrics_dir", "--metrics-file", "--metrics_file",
                     "--tensorboard-dir", "--tb-dir"), "metrics"),
    **dict.fromkeys(("--checkpoint-dir", "--checkpoint_dir", "--checkpoints", "--ckpt-dir",
                     "--ckpt_dir", "--save-dir", "--save_dir"), "checkpoints"),
    **dict.fromkeys(("--out", "--output", "--output-dir", "--output_dir", "--out-dir",
                     "--outdir"), "output"),
}

# Flags some scripts use for other things (`--metrics acc,f1`): a folder only when the
# value looks like a path (a separator or a suffix).
AMBIGUOUS_FLAGS = frozenset({"--metrics", "--output"})

Finding = tuple[KeyPath, str]


def needs_tensorboard(path: Path) -> bool:
    """Whether a metrics source is read as TensorBoard event files: an event file, a
    folder holding some, or a folder named as TensorBoard folders are."""
    if is_tensorboard_path(path):
        return True
    return any(part.lower() in TB_FOLDER_NAMES or "tensorboard" in part.lower()
               for part in path.parts[-3:])


def tensorboard_installed() -> bool:
    """Whether the TensorBoard reader's modules import (what the reader itself imports)."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import (  # noqa: F401
            EventFileLoader,
        )
    except ImportError:
        return False
    return True


def command_folders(command: Sequence[str] | str) -> list[tuple[str, str, str]]:
    """(flag, what, value) for each folder flag of a command: ``--flag X`` or ``--flag=X``."""
    try:
        args = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return []  # unbalanced quotes: the command's own problem, said elsewhere
    found = []
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag not in FOLDER_FLAGS:
            continue
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                continue
            value = args[i + 1]
        if flag in AMBIGUOUS_FLAGS and "/" not in value and not Path(value).suffix:
            continue
        if value:
            found.append((flag, FOLDER_FLAGS[flag], value))
    return found


def _norm(path: Path) -> Path:
    return Path(os.path.normpath(path))


def _related(a: Path, b: Path) -> bool:
    """The same folder, or one inside the other (a metrics file in the log folder)."""
    a, b = _norm(a), _norm(b)
    return a == b or a in b.parents or b in a.parents


def source_findings(campaign: Campaign, *, tensorboard: bool | None = None
                    ) -> tuple[list[Finding], list[Finding]]:
    """(errors, warnings) about the runs' sources. ``tensorboard``: whether the extra is
    installed (None: try the import, only when a source needs it)."""
    errors: list[Finding] = []
    warnings: list[Finding] = []
    for index, stage in enumerate(campaign.stages):
        run = campaign.runs.get(stage.run) if stage.run else None
        if run is None:
            continue
        metrics = [campaign.resolve(p) for p in run.metrics]
        for shown, full in zip(run.metrics, metrics, strict=True):
            if not needs_tensorboard(full):
                continue
            if tensorboard is None:
                tensorboard = tensorboard_installed()
            if not tensorboard:
                errors.append((("runs", run.id, "metrics"),
                               f"run {run.id}: metrics {shown} are TensorBoard event files and "
                               "the tensorboard package is not installed, so no rule would see "
                               f"a metric: {TENSORBOARD_INSTALL}"))
        if stage.command is None:
            continue
        cwd = stage.cwd or campaign.folder
        ckpt = campaign.resolve(run.checkpoints) if run.checkpoints else None
        for flag, what, value in command_folders(stage.command):
            named = Path(value) if Path(value).is_absolute() else cwd / value
            declared = {"metrics": metrics, "checkpoints": [ckpt] if ckpt else [],
                        "output": [*metrics, *([ckpt] if ckpt else [])]}[what]
            if declared and not any(_related(named, d) for d in declared):
                key = "metrics" if what == "output" else what
                listed = ", ".join(str(p) for p in (run.metrics if what != "checkpoints"
                                                    else (run.checkpoints,)) if p)
                warnings.append((("stages", index, "command"),
                                 f"stage {stage.id}: its command writes {flag} {value}, but "
                                 f"run {run.id} declares {key} {listed or '(none)'}: the "
                                 "cockpit would watch a folder the run does not write "
                                 "(rules blind)"))
    return errors, warnings
