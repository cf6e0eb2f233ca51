"""The one-line status for a tmux status bar, from the conductor's compact status line.

Deliberately light (the standard library, :mod:`cockpit.common.layout`,
:mod:`cockpit.common.lease` and :mod:`cockpit.common.durations` only): `cockpit status
--line` answers from the freshest status log (the default one, which the conductor writes
each tick, or a headless's ``--status-log``, recorded in ``.cockpit/status-log.path``)
without loading the campaign, YAML, NVML, psutil or the engine. It asks the lease
whether a face conducts (issue 39): when none does, the line says ``NOT CONDUCTED`` and
since when, the window still counting down from its end; a conductor that has not
written for :data:`LIVE_STATUS_S` is said as such. Unknown is never shown as ok. A
campaign no face ever opened has no log: the caller answers with the engine then.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cockpit.common.durations import format_duration
from cockpit.common.layout import (
    JOURNAL,
    STATE_DIR,
    STATUS_LINE_CACHE,
    STATUS_LOG,
    STATUS_LOG_POINTER,
)
from cockpit.common.lease import ConductorInfo, probe

if TYPE_CHECKING:
    from pathlib import Path  # paths are handled as text here: pathlib costs 10 ms to import

# A face writes a status line each tick; a log fresher than this is "live".
LIVE_STATUS_S = 15.0
POINTER_MAX_BYTES = 4096  # one absolute path
LINE_MAX_CHARS = 240  # a status bar shows less; never a screenful
CACHE_MAX_BYTES = 256 * 1024  # one compact line (a hand-made huge file is not read)


def line_from_status_log(campaign_file: str | Path, now: float | None = None) -> str | None:
    """The line from the freshest status log beside ``campaign_file``: the conductor's
    (issue 39), or ``NOT CONDUCTED`` and since when when no face conducts (None: no log
    and no conductor ever, or a line that is not a status line: the caller asks the
    engine)."""
    root = os.path.join(os.path.dirname(os.path.realpath(campaign_file)), STATE_DIR)
    conducted, info = probe(root, _machine())
    newest: tuple[float, str] | None = None
    for log in status_logs(root):
        try:
            mtime = os.stat(log).st_mtime
        except OSError:
            continue
        if newest is None or mtime > newest[0]:
            newest = (mtime, log)
    now = time.time() if now is None else now
    last = None if newest is None else read_last_line(newest[1])
    if not conducted:
        # Nobody holds the lease. The last conductor's line, unless the journal was
        # written since (`cockpit export`, a note): then the engine's last answer for
        # this journal, or None (the engine answers, and keeps its answer here).
        written = None if newest is None else newest[0]
        stale = written is None or _journal_newer(root, written)
        try:
            compact = cached_compact(root) if stale else json.loads(last or "")
            return None if compact is None else conductorless_line(
                compact, _since(info, written), now)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            return None
    if last is None or newest is None:
        return None  # the conductor's first tick is coming
    age = now - newest[0]
    live = -LIVE_STATUS_S <= age <= LIVE_STATUS_S  # a clock step either way: not live
    try:
        compact = json.loads(last)
        # The conductor writes a line each tick: a command's journal write since shows
        # at its next tick, so its line stands.
        return status_line(compact, now) if live else unwatched_line(compact, age, now)
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def _journal_key(root: str) -> list[int] | None:
    try:
        st = os.stat(os.path.join(root, JOURNAL))
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _journal_newer(root: str, than: float) -> bool:
    try:
        return os.stat(os.path.join(root, JOURNAL)).st_mtime > than
    except OSError:
        return False


def cached_compact(root: str) -> dict[str, Any] | None:
    """The engine's last compact line for the journal as it is now (None: none, or the
    journal moved since)."""
    try:
        fd = os.open(os.path.join(root, STATUS_LINE_CACHE), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(CACHE_MAX_BYTES + 1)
        data = json.loads(raw) if len(raw) <= CACHE_MAX_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("journal") != _journal_key(root) \
            or not isinstance(data.get("compact"), dict):
        return None
    compact: dict[str, Any] = data["compact"]
    return compact


def save_compact(campaign_file: str | Path, compact: dict[str, Any]) -> None:
    """Keep the engine's compact line for the journal as it is (a failure: the next
    call asks the engine again)."""
    root = os.path.join(os.path.dirname(os.path.realpath(campaign_file)), STATE_DIR)
    if not os.path.isdir(root):
        return  # a campaign no cockpit opened: reading it writes nothing
    path = os.path.join(root, STATUS_LINE_CACHE)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"journal": _journal_key(root), "compact": compact}, handle,
                      default=str)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _machine() -> int:
    raw = os.environ.get("COCKPIT_MACHINE", "").strip()
    return int(raw) if raw.isdigit() and int(raw) >= 1 else 1


def _since(info: ConductorInfo | None, log_mtime: float | None) -> float | None:
    """When the campaign stopped being conducted: the last conductor's clean exit, else
    (a kill, or a cockpit from before the lease) its last status line."""
    if info is not None and info.ended is not None:
        return info.ended
    return log_mtime


def not_conducted(since: float | None, now: float) -> str:
    """``NOT CONDUCTED since 17:40 UTC (23m)``: nobody runs the guards."""
    if since is None:
        return "NOT CONDUCTED: no cockpit runs the guards"
    when = time.strftime("%H:%M UTC", time.gmtime(since))
    ago = f" ({format_duration(now - since)})" if now >= since else ""
    return f"NOT CONDUCTED since {when}{ago}: no cockpit runs the guards"


def conductorless_line(compact: dict[str, Any], since: float | None, now: float) -> str:
    """The last conductor's line, told as such: the window counts down from its end,
    what was pending is named, and nobody conducts."""
    end = _epoch(compact["window"]["end"])
    parts = [f"{_hours_minutes(end - now)} left" if end > now else "window ended"]
    if (closing := _closing(compact, now)) is not None:
        parts.insert(0, closing)
    parts.append(not_conducted(since, now))
    rules = _rules(compact["rules"])
    if "FIRED" in rules or "warn" in rules or "blind" in rules:
        parts.append(rules)  # what the last line knew; never "ok" while nobody watches
    parts.extend(pending(compact))
    return one_line(" · ".join(parts))


def pending(compact: dict[str, Any]) -> list[str]:
    """What waits on a person, last on every line: alerts owed to a target (issue 43: a
    phone that has not heard yet) and decisions due."""
    out = []
    owed = compact.get("alerts_owed")
    if isinstance(owed, dict):
        total = sum(n for n in owed.values() if type(n) is int and n > 0)
        if total:
            out.append(f"alerts owed {total}")
    if compact.get("decisions_pending"):
        out.append("decide " + ",".join(compact["decisions_pending"]))
    return out


def status_logs(root: str) -> list[str]:
    """The default status log, and the one headless recorded (when it is another)."""
    logs = [os.path.join(root, STATUS_LOG)]
    try:
        fd = os.open(os.path.join(root, STATUS_LOG_POINTER), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(POINTER_MAX_BYTES + 1)
    except OSError:
        return logs
    text = raw.decode("utf-8", errors="replace").strip()
    if len(raw) <= POINTER_MAX_BYTES and text and os.path.isabs(text) \
            and not any(c in text for c in "\n\r\0"):
        logs.append(text)
    return logs


def status_line(compact: dict[str, Any], now: float | None = None) -> str:
    """`61h12m left · fits +17h · GPU 98% · ckpt 12m · rules ok` — never more than one
    line; after the close `closed — fetch by 12-06 14:00 UTC (20h left) · …`; an export
    that went stale, or one of a question still open, says so first (issue 41)."""
    now = time.time() if now is None else now
    left = compact["window"]["left_s"]
    parts = [f"{_hours_minutes(left)} left" if left > 0 else "window ended"]
    if isinstance(compact["window"].get("landing"), str):
        parts.append(compact["window"]["landing"])  # lands in 5h12m, landing, landed
    if (closing := _closing(compact, now)) is not None:
        parts.insert(0, closing)
    if not compact.get("closed"):
        fc = compact["forecast"]
        parts.append(f"{fc['verdict']} {format_duration(fc['slack_s'], signed=True)}")
    if compact.get("gpu_status") == "unavailable":
        parts.append("GPU n/a")
    elif compact.get("gpu_util_mean") is not None:
        sim = "sim " if compact.get("gpu_status") == "simulated" else ""
        parts.append(f"GPU {sim}{compact['gpu_util_mean']:.0f}%")
    if compact.get("ckpt_age_s") is not None:
        parts.append(f"ckpt {format_duration(compact['ckpt_age_s'])}")
    parts.append(_rules(compact["rules"]))
    conductor = compact.get("conductor")
    if isinstance(conductor, dict) and conductor.get("conducted") is False:
        parts.append("NOT CONDUCTED")  # the engine's answer: nobody runs the guards
    parts.extend(pending(compact))
    return one_line(" · ".join(parts))


def unwatched_line(compact: dict[str, Any], age_s: float, now: float) -> str:
    """The conductor has not written for a while (hung, or a clock step): nobody can
    say the rules are watched. The window counts down from its end; what was pending
    when the line was written is named as such."""
    end = _epoch(compact["window"]["end"])
    parts = [f"{_hours_minutes(end - now)} left" if end > now else "window ended"]
    if (closing := _closing(compact, now)) is not None:
        parts.insert(0, closing)
    since = f" for {format_duration(age_s)}" if age_s >= 0 else " (the clock stepped back)"
    parts.append(f"NOT WATCHED: the conductor has written nothing{since}")
    parts.extend(pending(compact))
    return one_line(" · ".join(parts))


def one_line(text: str) -> str:
    """Printable characters only (a name may hold escape codes), bounded."""
    clean = "".join(c if c.isprintable() else " " for c in text)
    return clean if len(clean) <= LINE_MAX_CHARS else clean[:LINE_MAX_CHARS - 1] + "…"


def _rules(rules: dict[str, Any]) -> str:
    fired = rules["fired"]
    warned = rules.get("warn") or []  # a warn rule that fired (a stalled run)
    blind = rules.get("blind") or []  # unknown is not ok (issue 22)
    if fired or warned or blind:
        return ("rules" + (f" FIRED {','.join(fired)}" if fired else "")
                + (f" warn {','.join(warned)}" if warned else "")
                + (f" ◌ {len(blind)} blind" if blind else ""))
    if rules.get("ok", 1) or not rules.get("waiting"):
        return "rules ok"
    return "rules waiting"  # every rule waits for its run to start: none watched yet


def _closing(compact: dict[str, Any], now: float) -> str | None:
    """`closed — fetch by …` when the question is answered and its export current;
    else the export's own words, as the engine wrote them (`export STALE: predates 2
    verdicts — cockpit export FILE`, `exported, question open: …`); None: no export."""
    if compact.get("closed"):
        return _closed(compact["closed"], now)
    export = compact.get("export")
    words = export.get("words") if isinstance(export, dict) else None
    return words if isinstance(words, str) and words else None


def _closed(closed: dict[str, Any], now: float) -> str:
    """`closed — fetch by 12-06 14:00 UTC (20h left)`: the export is verified; what is
    left is to fetch it before the deadline."""
    by = _epoch(closed["fetch_by"])
    when = time.strftime("%m-%d %H:%M UTC", time.gmtime(by))
    if by <= now:
        return f"closed — fetch deadline {when} passed {format_duration(now - by)} ago"
    return f"closed — fetch by {when} ({format_duration(by - now)} left)"


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _hours_minutes(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m"


def read_last_line(path: str | Path, max_bytes: int = 256 * 1024) -> str | None:
    """The last complete line of a file, reading only its tail."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            tail = handle.read()
    except OSError:
        return None
    lines = tail.split(b"\n")
    for raw in reversed(lines[:-1] if tail.endswith(b"\n") else lines[:-1]):
        if raw.strip():
            return raw.decode("utf-8", errors="replace")
    return None
