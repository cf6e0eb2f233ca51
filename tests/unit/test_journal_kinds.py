"""The one table of event kinds (cockpit.journal.events) drives the reader's checks, the
sentence, the ownership and the fold's dispatch; the files under .cockpit/ are named in
one place (cockpit.journal.paths).

Pure and fast but for the reader's checks, which read real journal files."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.campaign import load_campaign
from cockpit.campaign.model import STATE_DIR, Campaign
from cockpit.journal.events import EVENT_KINDS, SCOPES, describe_event, event_problem
from cockpit.journal.fields import ANY, FIELD_TYPES, Event
from cockpit.journal.fold import FOLDED_AS_NOTHING, HANDLERS, fold
from cockpit.journal.log import Journal
from cockpit.journal.paths import CampaignFiles
from tests.helpers.campaigns import FIXED_START, step_command, write_campaign

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)
# Values tried, in turn, to find one a field's type refuses.
_WRONG: tuple[object, ...] = ({"a": "b"}, True, None, [1.5], "text", 1.5, {"min": "x"})


def _wrong_value(name: str) -> object:
    kind = EVENT_KINDS["stage_started"].fields.get(name) or FIELD_TYPES[name]
    for value in _WRONG:
        if not kind.fits(value):
            return value
    raise AssertionError(f"no wrong value for field {name}")


def _typed_fields() -> list[tuple[str, str]]:
    """(kind, field) for every checked field of every kind of the table."""
    return [(k.kind, name) for k in EVENT_KINDS.values()
            for name, kind in k.fields.items() if kind is not ANY]


def _line(seq: int, kind: str, **fields: object) -> str:
    t = (T0 + timedelta(minutes=seq)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"seq": seq, "t": t, "kind": kind, **fields})


# ----------------------------------------------------------------------- validation
@pytest.mark.parametrize(("kind", "name"), _typed_fields())
def test_a_field_of_the_wrong_type_in_any_kind_is_a_located_skipped_line(
        tmp_path: Path, kind: str, name: str) -> None:
    bad = _wrong_value(name)
    path = tmp_path / "journal.jsonl"
    path.write_text("\n".join([_line(1, "note", stage="a", text="fine"),
                               _line(2, kind, **{name: bad}),
                               _line(2, "note", stage="a", text="after")]) + "\n")
    journal = Journal(path)
    assert [ev["seq"] for ev in journal.events()] == [1, 2]  # the bad line: not an event
    (problem,) = journal.problems()
    assert problem.line == 2
    assert problem.message.startswith(f"{kind} event with a bad field (field {name!r}")
    assert problem.message.endswith(": skipped")


def test_every_kind_checks_its_typed_fields_and_accepts_what_writers_write() -> None:
    assert _typed_fields()  # the table types something
    ok = {"seq": 1, "t": "2026-12-02T09:00:00.000000Z", "kind": "stage_started",
          "stage": "a", "run": "a", "pid": 12, "gpus": [0, 1], "manual": False,
          "create_time": 1.5, "claim": 3}
    assert event_problem(ok) is None
    assert event_problem({**ok, "gpus": [0, "1"]}) == \
        "field 'gpus' is [0, '1'], not a list of GPU indexes"


def test_a_kind_not_in_the_table_is_read_described_and_not_folded(tmp_path: Path) -> None:
    """A newer cockpit's kind: read (its fields checked by the registry), listed field
    by field in its sentence, and nothing in the state."""
    path = tmp_path / "journal.jsonl"
    path.write_text("\n".join([_line(1, "from_the_future", stage="a", extra=[1, 2]),
                               _line(2, "from_the_future", pid="not a pid")]) + "\n")
    journal = Journal(path)
    (event,) = journal.events()
    assert [p.line for p in journal.problems()] == [2]
    assert "field 'pid'" in journal.problems()[0].message
    assert describe_event(event) == "from_the_future: stage=a, extra=[1, 2]"


# ----------------------------------------------------------------------- the table
def test_the_table_names_scope_fields_and_writer_of_every_kind() -> None:
    assert len(EVENT_KINDS) >= 28
    for kind in EVENT_KINDS.values():
        assert kind.scope in SCOPES, kind.kind
        assert kind.writer and kind.fields, kind.kind
        assert not {"seq", "t", "kind"} & set(kind.fields), kind.kind
        describe_event({"seq": 1, "t": "x", "kind": kind.kind})  # an empty event: a line


def test_every_kind_has_a_fold_handler_or_is_folded_as_nothing() -> None:
    assert set(HANDLERS) | FOLDED_AS_NOTHING == set(EVENT_KINDS)
    assert not set(HANDLERS) & FOLDED_AS_NOTHING


def test_the_typed_event_names_every_field_of_the_table() -> None:
    names = set(get_type_hints(Event))
    assert set(FIELD_TYPES) <= names
    for kind in EVENT_KINDS.values():
        assert set(kind.fields) <= names, (kind.kind, set(kind.fields) - names)


_WRITES = re.compile(r"(?:txn|journal|log)\.append\(\s*\"(\w+)\"|_?journal_once\(\s*\"(\w+)\"")


def test_every_kind_the_cockpit_writes_is_in_the_table() -> None:
    """Found in the source: every ``txn.append("kind"``, ``journal.append(...)``,
    ``log.append(...)`` and ``_journal_once("kind"`` of the package."""
    written: dict[str, str] = {}
    for path in (ROOT / "cockpit").rglob("*.py"):
        for match in _WRITES.finditer(path.read_text(encoding="utf-8")):
            written[match[1] or match[2]] = str(path.relative_to(ROOT))
    assert {"stage_started", "export_done", "result_accepted", "clock_jump"} <= set(written)
    unknown = {k: where for k, where in written.items() if k not in EVENT_KINDS}
    assert not unknown
    assert "environment_recorded" in EVENT_KINDS  # written through env_record.ENV_KIND


# ----------------------------------------------------------------------- the fold
def _plan(folder: Path) -> Campaign:
    stages = [
        {"id": "pilot", "hours": 1, "resource": "gpu:0", "category": "essential",
         "decision_point": True, "run": "pilot", "command": step_command()},
        {"id": "main", "hours": 1, "resource": "gpu:0", "category": "useful",
         "after": ["pilot"], "run": "main", "command": step_command()},
    ]
    return load_campaign(write_campaign(folder, stages, start=FIXED_START))


_PLAN: dict[str, Campaign] = {}
_NAMES = sorted(set(FIELD_TYPES) - {"seq", "t", "kind"})
_values = st.one_of(st.none(), st.booleans(), st.integers(-2, 40), st.floats(allow_nan=True),
                    st.sampled_from(["pilot", "main", "ghost", "done", "failed", "1.5", ""]),
                    st.lists(st.sampled_from(["pilot", "main"]), max_size=2),
                    st.lists(st.integers(0, 3), max_size=2))
_event = st.builds(
    lambda kind, fields, extra: {"kind": kind, **fields, **extra},
    st.sampled_from([*sorted(EVENT_KINDS), "unknown_kind"]),
    st.dictionaries(st.sampled_from(_NAMES), _values, max_size=6),
    st.dictionaries(st.sampled_from(["reason", "override", "failed", "note", "value"]),
                    _values, max_size=2))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(_event, max_size=30))
def test_the_fold_never_raises_on_any_journal_as_read(
        tmp_path_factory: pytest.TempPathFactory, raw: list[dict[str, Any]]) -> None:
    """Any events the reader keeps (their fields fit the table) fold without raising; a
    kind not in the table changes nothing but the last seq."""
    if "plan" not in _PLAN:
        _PLAN["plan"] = _plan(tmp_path_factory.mktemp("kinds"))
    plan = _PLAN["plan"]
    events: list[Event] = []
    for ev in raw:
        t = (T0 + timedelta(minutes=len(events))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        candidate = {**ev, "seq": len(events) + 1, "t": t}
        if event_problem(candidate) is None:
            events.append(cast(Event, candidate))
    state = fold(plan, events, T0)
    known = [ev for ev in events if ev.get("kind") in EVENT_KINDS]
    again = fold(plan, known, T0)
    assert (again.stages, again.runs, again.costs, again.decisions) == \
        (state.stages, state.runs, state.costs, state.decisions)
    assert state.last_seq == len(events)


# ----------------------------------------------------------------------- paths
def test_every_file_under_the_state_folder_is_named_in_one_place(tmp_path: Path) -> None:
    files = CampaignFiles.beside(tmp_path / "campaign.yaml")
    assert files.root == tmp_path.resolve() / STATE_DIR
    assert files.journal_lock == files.root / "journal.jsonl.lock"
    assert Journal(files.journal).lock_path == files.journal_lock
    assert files.peer(2).journal == files.root / "peers" / "2" / "journal.jsonl"
    assert str(CampaignFiles.relative().journal) == ".cockpit/journal.jsonl"
    # No other module spells the folder or builds a path in it by hand.
    spelled = []
    for path in (ROOT / "cockpit").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("cockpit/assets/") or rel in ("cockpit/journal/paths.py",
                                                         "cockpit/common/layout.py"):
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"[\"']\.cockpit[\"'/]|state_dir\s*/", code):
                spelled.append(f"{rel}:{no}: {line.strip()}")
    assert not spelled, spelled
