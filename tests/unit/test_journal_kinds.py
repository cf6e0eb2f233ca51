"""The one table of event kinds (cockpit.journal.events) drives the reader's checks, the
sentence, the ownership and the fold's dispatch; the files under .cockpit/ are named in
one place (cockpit.journal.paths).

Pure and fast but for the reader's checks, which read real journal files."""

from __future__ import annotations

import ast
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
from cockpit.common import event_kinds as kinds
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


def _package() -> dict[str, ast.Module]:
    """Every module of the package but the user's templates, parsed, by dotted name
    (without ``cockpit.``)."""
    modules = {}
    for path in sorted((ROOT / "cockpit").rglob("*.py")):
        if "templates" in path.parts:
            continue  # the user's code: it never imports the cockpit's internals
        name = ".".join(path.relative_to(ROOT / "cockpit").with_suffix("").parts)
        modules[name] = ast.parse(path.read_text(encoding="utf-8"))
    return modules


_ONCE = ("journal_once", "RecordOnce")  # (kind, key, ...): a once-only event
_JOURNALS = ("txn", "journal")  # what a journal is called where it is appended to


def _writes(tree: ast.Module) -> list[ast.expr]:
    """The kind argument of every journal write in a module: ``txn.append(kind, …)``,
    ``….journal.append(kind, …)``, ``journal_once(kind, …)``, ``RecordOnce(kind, …)``."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "append":
            owner = func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name in _JOURNALS:
                found.append(node.args[0])
        elif (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _ONCE:
            found.append(node.args[0])
    return found


def test_the_kind_names_are_declared_once_and_the_table_has_a_row_for_each() -> None:
    declared = {name: value for name, value in vars(kinds).items() if name.isupper()}
    assert sorted(declared.values()) == sorted(EVENT_KINDS)
    assert all(value == name.lower() for name, value in declared.items())


def test_no_module_retypes_a_kind_name() -> None:
    """One vocabulary: a kind's name is written once, in cockpit/common/event_kinds.py; every
    other module names it through the constant (a typo is then an import error, not a
    silently unfolded event). The plain-word kinds (note, cost, decision, warning,
    landing) are also ordinary words (a field, a command), so they are held where a kind
    is written: the journal writes below."""
    retyped = []
    for name, tree in _package().items():
        if name == "common.event_kinds":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and "_" in node.value and node.value in EVENT_KINDS):
                retyped.append(f"cockpit/{name.replace('.', '/')}.py:{node.lineno}: "
                               f"{node.value!r}")
    assert not retyped, "use cockpit.common.event_kinds:\n" + "\n".join(retyped)


def test_every_journal_write_names_its_kind_from_the_vocabulary() -> None:
    constants = {name for name in vars(kinds) if name.isupper()}
    literal, writes = [], 0
    for name, tree in _package().items():
        for arg in _writes(tree):
            writes += 1
            if isinstance(arg, ast.Constant):
                literal.append(f"{name}:{arg.lineno}: {arg.value!r}")
            elif isinstance(arg, ast.Name) and arg.id.isupper():
                assert arg.id in constants, f"{name}:{arg.lineno}: {arg.id} is not a kind"
    assert writes > 40 and not literal, literal


def test_the_writer_column_names_the_modules_that_write_each_kind() -> None:
    """The table's writer column is held to the code both ways: every module it names
    exists and uses the kind's constant, and every module that journals a kind by its
    constant (``append``, ``journal_once``, ``RecordOnce``) is named."""
    modules = _package()
    named_of = {row.kind: {w.strip() for w in row.writer.split(",")}
                for row in EVENT_KINDS.values()}
    for kind, named in named_of.items():
        constant = kind.upper()
        for module in named:
            assert module in modules, f"{kind}: writer {module} does not exist"
            uses = {n.id for n in ast.walk(modules[module]) if isinstance(n, ast.Name)}
            assert constant in uses, f"{kind}: {module} never names {constant}"
    for module, tree in modules.items():
        for arg in _writes(tree):
            if isinstance(arg, ast.Name) and arg.id.lower() in named_of:
                assert module in named_of[arg.id.lower()], \
                    f"{module} journals {arg.id.lower()} but the table's writers are " \
                    f"{sorted(named_of[arg.id.lower()])}"


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
