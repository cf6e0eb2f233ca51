"""What `cockpit check` finds in the runs' metrics and checkpoint sources (issue 22).

Blind rules start here: a metrics source whose reader needs an extra that is not
installed reads nothing all campaign long (an error, with the install command), and a
metrics or checkpoint folder that is not the one the stage's command names (``--logdir
X`` while the run declares ``metrics: Y``) is watched in vain (a warning). So does a
``non_finite`` rule on the loss of a run read from the Hugging Face Trainer's own files
(``trainer_state.json``, its output folder, TensorBoard under its ``runs/``) whose
training script does not add the cockpit's integration: the Trainer's
``logging_nan_inf_filter`` logs a NaN loss as 0.0 (:func:`nan_filter_findings`). Each
finding carries the campaign file key path it is about, so the caller can locate it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from cockpit.campaign.model import Campaign, Run, Stage
from cockpit.campaign.yamlread import KeyPath
from cockpit.common.metric_names import LOSS, canonical_name
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
    return errors, warnings + nan_filter_findings(campaign)


INTEGRATION = "cockpit.integrations"  # what a script that adds the integration imports
SCRIPT_READ_LIMIT = 1024 * 1024


def trainer_source(path: Path) -> bool:
    """Whether a metrics source is the Hugging Face Trainer's own: its
    ``trainer_state.json``, its output folder (a folder not named as TensorBoard's), or
    TensorBoard event files under a ``runs`` folder (the Trainer's default logging dir)."""
    if path.name == "trainer_state.json":
        return True
    if needs_tensorboard(path):
        return "runs" in path.parts[-3:-1] or path.name == "runs"
    return path.is_dir() or (not path.suffix and not path.exists())


def script_of(stage: Stage, folder: Path) -> Path | None:
    """The Python script a stage's command runs (its first ``*.py`` word), if any."""
    if stage.command is None:
        return None
    try:
        words = shlex.split(stage.command) if isinstance(stage.command, str) \
            else list(stage.command)
    except ValueError:
        return None
    script = next((w for w in words if w.endswith(".py")), None)
    if script is None:
        return None
    return Path(script) if Path(script).is_absolute() else (stage.cwd or folder) / script


def adds_integration(script: Path | None) -> bool:
    """Whether the script imports the cockpit's integrations (read, never run)."""
    if script is None:
        return False
    try:
        with open(script, "rb") as handle:
            return INTEGRATION.encode() in handle.read(SCRIPT_READ_LIMIT)
    except OSError:
        return False


def nan_filter_findings(campaign: Campaign) -> list[Finding]:
    """A warning per run whose ``non_finite`` rule on the loss reads a Trainer source
    while its script adds no integration (decided from the file and the script's text:
    a script the cockpit cannot find or read counts as one without)."""
    found: list[Finding] = []
    for stage in campaign.stages:
        run = campaign.runs.get(stage.run) if stage.run else None
        if run is None:
            continue
        sources = [shown for shown in run.metrics if trainer_source(campaign.resolve(shown))]
        rules = [r for r in campaign.stop_rules if r.kind == "non_finite" and r.metric
                 and canonical_name(r.metric) == LOSS and r.applies_to(run.id)]
        if not sources or not rules:
            continue
        script = script_of(stage, campaign.folder)
        if adds_integration(script):
            continue
        found.append((("runs", run.id, "metrics"), _nan_filter_words(run, rules[0].id,
                                                                      sources[0], script)))
    return found


def _nan_filter_words(run: Run, rule: str, source: Path, script: Path | None) -> str:
    which = f"its script {script.name} does not" if script is not None \
        else "no training script of it was found that would"
    return (f"run {run.id}: stop rule {rule} watches the loss from the Hugging Face "
            f"Trainer's {source}, and {which} add the cockpit's integration: with "
            "logging_nan_inf_filter (on by default) the Trainer logs a NaN loss as 0.0 or "
            "as the mean of the finite ones, so the rule may never fire (the cockpit still "
            "counts a loss of 0.0 beside a non-finite grad_norm). Add "
            "trainer.add_callback(CockpitCallback()) from cockpit.integrations.hf (it "
            "reports the unfiltered loss), or set logging_nan_inf_filter=False")
