"""The commands about the campaign as a whole: check, plan, status, headless, tui,
serve, demo, init.

This module owns their handlers: the read-only ones (check, plan and its text and JSON
renderings, status and its light ``--line`` path), ``cockpit fleet`` (its view and the
actions it runs where a stage lives) and the ones that hand over to a face (headless,
tui, serve, demo) or to the scaffold (init). Their arguments are declared in
:mod:`cockpit.cli.parser`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from cockpit.cli.common import EXIT_OK, acting, machine_of
from cockpit.common.units import for_packages, format_duration, format_hours

# The driver textual-serve gives each tab's process (its screen goes to a websocket).
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"


@acting
def cmd_status(args: argparse.Namespace) -> int:
    fleet = bool(getattr(args, "fleet", False))
    if args.line and not fleet:
        from cockpit.headless.status_line import line_from_status_log

        line = line_from_status_log(args.file)  # the fast path's, when `main` was skipped
        if line is not None:
            print(line)
            return EXIT_OK
    from cockpit.engine.snapshot import snapshot_json
    from cockpit.fleet.open import open_engine
    from cockpit.headless.render_text import status_text
    from cockpit.headless.status_line import save_compact, status_line
    from cockpit.headless.status_log import compact_json

    machine = None if fleet else machine_of(args)  # `cockpit fleet`: every machine a peer
    if args.line:
        # No long NVML init for a status bar: GPUs show as n/a unless simulated.
        engine = open_engine(args.file, read_only=True, simulate_gpus=args.simulate_gpus,
                             telemetry=bool(args.simulate_gpus), machine=machine, fleet=fleet,
                             pull="once" if fleet else "cache")
        try:
            compact = compact_json(engine.tick())
        finally:
            engine.close()
        if not fleet and not compact["conductor"]["conducted"]:
            # Nobody conducts: the next call answers from this until the journal moves.
            save_compact(args.file, json.loads(json.dumps(compact, default=str)))
        print(status_line(compact))
        return EXIT_OK
    engine = open_engine(args.file, read_only=True, simulate_gpus=args.simulate_gpus,
                         machine=machine, fleet=fleet)
    try:
        snap = engine.tick()
    finally:
        engine.close()
    if args.json:
        print(json.dumps(snapshot_json(snap), indent=2))
    else:
        print(status_text(snap))
    return EXIT_OK


@acting
def cmd_fleet(args: argparse.Namespace) -> int:
    """`cockpit fleet FILE`: every machine, read over SSH; an action runs on its owner."""
    if args.action:
        return _fleet_action(args)
    if args.json or args.line:
        return cmd_status(args)
    if args.headless:
        from cockpit.headless.loop import run_headless

        return run_headless(args)
    need_terminal(args, "cockpit fleet FILE --headless")
    from cockpit.tui.app import run_tui

    return run_tui(args)


def _fleet_action(args: argparse.Namespace) -> int:
    from cockpit.cli.actions import FLEET_ACTIONS, action_parser
    from cockpit.common.errors import InputError
    from cockpit.common.printable import printable_block
    from cockpit.engine import describe_event
    from cockpit.fleet.open import open_engine

    words = list(args.action)
    if not words or words[0] not in FLEET_ACTIONS:
        raise InputError(f"cockpit fleet: the action must be one of {', '.join(FLEET_ACTIONS)}")
    # The action's own arguments, checked here as the command itself checks them.
    sub = action_parser().parse_args([words[0], args.file, *words[1:]])
    engine = open_engine(args.file, fleet=True, telemetry=False, pull="once")
    try:
        what = words[0]
        if what == "start":
            out: Any = engine.start(sub.stage, force=sub.force)
        elif what == "stop":
            out = engine.stop(sub.target, sub.reason)
        elif what == "mark":
            out = engine.mark(sub.stage, sub.what, sub.note)
        elif what == "decide":
            out = engine.decide(sub.outcome, stage=sub.stage, drops=sub.drop, note=sub.note)
        elif what == "accept":
            out = engine.accept(sub.run, sub.note, override=sub.override)
        elif what == "reject":
            out = engine.reject(sub.run, sub.note)
        elif what == "note":
            out = engine.note(sub.stage, sub.text)
        else:
            out = engine.cost(sub.label, sub.amount, sub.currency)
    finally:
        engine.close()
    for ev in out if isinstance(out, list) else [out] if out else []:
        # "remote" is the peer's own cockpit's output over SSH: untrusted like the rest.
        text = ev.get("text") if ev.get("kind") == "remote" else describe_event(ev)
        print(printable_block(f"machine {ev.get('machine')}: journal #{ev.get('seq')} "
                              f"{ev.get('t')} {text}"))
    return EXIT_OK


def need_terminal(args: argparse.Namespace, instead: str) -> None:
    """The screen needs a terminal: without one (a pipe, a file, cron, systemd) it would
    write screen escapes into the output for ever; say what to run instead (exit 2).
    ``cockpit demo`` decides by itself and is not checked here. Bad input is named first
    (the campaign file, the theme): its located message says more than "no terminal"."""
    from cockpit.campaign import load_campaign
    from cockpit.common.errors import InputError
    from cockpit.tui.themes import ThemeMissing, resolve

    load_campaign(args.file)
    try:
        resolve(getattr(args, "theme", None))
    except ThemeMissing as exc:
        raise InputError(f"cockpit: {exc}") from None
    from cockpit.serve.server import TAB_DRIVER

    if os.environ.get("TEXTUAL_DRIVER") in (WEB_DRIVER, TAB_DRIVER):
        return  # a tab of `cockpit serve`: the screen goes to the browser
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise InputError(f"cockpit {args.command}: the cockpit's screen needs a terminal "
                         "(standard input and output are not one); without a screen run "
                         f"`{instead}` (or `cockpit status FILE`)")


@acting
def cmd_tui(args: argparse.Namespace) -> int:
    need_terminal(args, "cockpit headless FILE")
    from cockpit.tui.app import run_tui

    return run_tui(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from cockpit.serve.server import run_serve

    return run_serve(args)


@acting
def cmd_demo(args: argparse.Namespace) -> int:
    from cockpit.cli.demo import run_demo

    return run_demo(args)


def cmd_init(args: argparse.Namespace) -> int:
    from cockpit.cli.scaffold import run_init

    return run_init(args)


@acting
def cmd_headless(args: argparse.Namespace) -> int:
    from cockpit.headless.loop import run_headless

    return run_headless(args)


def cmd_check(args: argparse.Namespace) -> int:
    from cockpit.campaign import load_campaign
    from cockpit.planning.advice import plan_warnings

    campaign = load_campaign(args.file)
    for warning in plan_warnings(campaign):
        print(f"{args.file}: warning: {warning}", file=sys.stderr)
    for rule in campaign.stop_rules:
        if rule.implicit:  # a rule no one wrote is still a rule: say it is there
            print(f"{args.file}: note: {implicit_rule_text(rule)}", file=sys.stderr)
    _check_sources(campaign, args.file)
    print("ok")
    return EXIT_OK


def _check_sources(campaign: Any, file: str) -> None:
    """The runs' metrics and checkpoint sources (issue 22): a reader's missing extra is an
    error (InputError: exit 2), a folder the command does not name a warning; located."""
    from pathlib import Path

    from cockpit.campaign.yamlread import parse_yaml, read_text
    from cockpit.common.errors import InputError
    from cockpit.runs.source_check import source_findings

    errors, warnings = source_findings(campaign)
    if not errors and not warnings:
        return
    loc = parse_yaml(read_text(Path(file)), file)
    for path, message in warnings:
        print(f"{loc.problem(path, 'warning: ' + message)}", file=sys.stderr)
    if errors:
        raise InputError([loc.problem(path, message) for path, message in errors])


def implicit_rule_text(rule: Any) -> str:
    """The default stalled rule in words (``check`` shows it; the file does not)."""
    return (f"stop rule {rule.id!r} (the default, not in the file): {rule.action} when a "
            f"train run ({', '.join(rule.runs)}) reports no new step for {rule.factor:g}× "
            f"its median step interval, and at least {format_duration(rule.floor_s)}; a "
            "stalled rule under stop_rules: replaces it")


def cmd_plan(args: argparse.Namespace) -> int:
    from cockpit.campaign import load_campaign
    from cockpit.planning.advice import plan_warnings
    from cockpit.planning.schedule import plan_campaign

    campaign = load_campaign(args.file)
    plan = plan_campaign(campaign, args.overrun)
    warnings = plan_warnings(campaign)
    if args.json:
        print(json.dumps(plan_json(campaign, plan, warnings), indent=2))
        return EXIT_OK
    print(render_plan(campaign, plan, warnings))
    return EXIT_OK


def plan_json(campaign: Any, plan: Any, warnings: list[str]) -> dict[str, Any]:
    from cockpit.planning.schedule import no_options_reason

    f = plan.figures
    return {
        "campaign": campaign.id,
        "question": campaign.question,
        "offer": campaign.package.offer.id,
        "count": campaign.package.count,
        "window_start": campaign.package.start.isoformat(),
        "window_hours": f.window_hours,
        "reserved_hours": f.reserved_hours,
        "unused_hours": f.unused_hours,
        "exceeds_by_hours": f.exceeds_by_hours,
        "overrun_hours": f.overrun_hours,
        "fits": f.fits,
        "gpu_busy_hours": f.gpu_busy_hours,
        "human_hours": f.human_hours,
        "cost": plan.cost.as_json() if plan.cost else None,
        "cost_note": None if plan.cost else "offer price unknown: state it under offers:",
        "stages": [
            {
                "id": s.stage.id,
                "start_hours": round(s.start, 4),
                "end_hours": round(s.end, 4),
                "hours": round(s.hours, 4),
                "resource": s.stage.resource_label,
                "category": s.stage.category,
                "machine": s.stage.machine,
                "decision_point": s.stage.decision_point,
            }
            for s in plan.slots
        ],
        "options": [o.as_json() for o in plan.options],
        # D11: when no option makes the plan fit, why (the options left only help).
        "no_option_reason": None if f.fits or plan.fitting else
        no_options_reason(campaign, f.reserved_hours, plan.options),
        "warnings": warnings,
    }


def render_plan(campaign: Any, plan: Any, warnings: list[str]) -> str:
    from cockpit.planning.schedule import no_options_reason

    pkg = campaign.package
    f = plan.figures
    cost = str(plan.cost) if plan.cost else "price unknown"
    lines = [
        f"campaign {campaign.id} · {pkg.offer.id} × {pkg.count} · {cost} "
        f"{for_packages(pkg.count)}"
        f" · window {format_hours(f.window_hours)} h from {pkg.start.isoformat()}",
    ]
    if campaign.question:
        lines.append(f"question: {campaign.question}")
    lines.append("")
    width = max(len("stage"), *(len(s.stage.id) for s in plan.slots))
    lines.append(f"{'stage':<{width}}  {'resource':<9} {'category':<11} {'start':>6} {'end':>6}"
                 f" {'hours':>6}")
    for slot in plan.slots:
        mark = " ◆ decision" if slot.stage.decision_point else ""
        lines.append(f"{slot.stage.id:<{width}}  {slot.stage.resource_label:<9} "
                     f"{slot.stage.category:<11} {slot.start:>6.1f} {slot.end:>6.1f} "
                     f"{slot.hours:>6.1f}{mark}")
    lines.append("")
    reserved = f"reserved {format_hours(f.reserved_hours)} h"
    if f.overrun_hours:
        reserved += f" (with a {format_hours(f.overrun_hours)} h overrun)"
    window = f"of a {format_hours(f.window_hours)} h window"
    if f.fits:
        lines.append(f"{reserved} {window} · unused {format_hours(f.unused_hours)} h · fits")
    else:
        lines.append(f"{reserved} {window} · EXCEEDS by {format_hours(f.exceeds_by_hours)} h")
    lines.append(f"GPU busy {format_hours(f.gpu_busy_hours)} h · human "
                 f"{format_hours(f.human_hours)} h · durations are the plan's, not a promise "
                 "of the provider (D7)")
    if not f.fits and not plan.fitting:
        lines.append(no_options_reason(campaign, f.reserved_hours, plan.options))
    if plan.options:
        lines.append("options (D11):" if plan.fitting else
                     "what would help, none enough on its own (D11):")
        lines.extend(f"  - {o.describe()}" for o in plan.options)
    for warning in warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
