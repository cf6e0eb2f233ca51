"""``cockpit rules [ID]``: the domain rules (D1–D24) the cockpit's messages cite.

This module owns the command and the reading of the rules from ``docs/domain.md``, which
the package carries (``cockpit/assets/domain.md``, a link to it in the repository), so
the command answers from a wheel as from a checkout. ``cockpit rules`` lists each rule's
id and title (its first sentence) under its section; ``cockpit rules D19`` prints that
rule whole: its section, its text and where the cockpit applies it (its edge rules
included). An unknown id is one line and exit 2. It reads only.

The file's rules are rows of its tables (``| D19 | rule | where |``); a bullet
(``- D19. rule``) is read too, so a change of style keeps the command working.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from cockpit.cli.common import EXIT_OK
from cockpit.common.errors import InputError

DOC = "docs/domain.md"  # as the repository and the messages name it
WIDTH = 88
_ID = re.compile(r"[A-Z]\d+[a-z]?")
_BULLET = re.compile(r"-\s+([A-Z]\d+[a-z]?)[.:]\s+(.*)")


@dataclass(frozen=True)
class Rule:
    """One rule of the domain file."""

    id: str  # "D19"
    section: str  # the heading it is under
    text: str  # the rule itself
    where: str = ""  # where the cockpit applies it ("" when the file does not say)

    @property
    def title(self) -> str:
        """The rule's first sentence."""
        head = re.split(r"(?<=[.!?])\s", self.text, maxsplit=1)[0]
        return head.rstrip()


def parse_rules(text: str) -> list[Rule]:
    """The rules of the domain file, in its order (pure)."""
    rules: list[Rule] = []
    section = ""
    bullet: list[str] | None = None  # the bullet being read: [id, text...]

    def close_bullet() -> None:
        nonlocal bullet
        if bullet is not None:
            rules.append(Rule(bullet[0], section, " ".join(bullet[1:])))
            bullet = None

    for raw in text.splitlines():
        line = raw.strip()
        if bullet is not None and line and raw[:1].isspace() and not line.startswith("-"):
            bullet.append(line)  # a bullet's continuation line
            continue
        close_bullet()
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.startswith("|") and line.endswith("|"):
            cells = [c.strip().replace("\\|", "|")
                     for c in re.split(r"(?<!\\)\|", line[1:-1])]
            if len(cells) >= 2 and _ID.fullmatch(cells[0]):
                rules.append(Rule(cells[0], section, cells[1],
                                  cells[2] if len(cells) > 2 else ""))
        elif (found := _BULLET.fullmatch(line)) is not None:
            bullet = [found.group(1), found.group(2)]
    close_bullet()
    return rules


def rule_list(rules: list[Rule]) -> str:
    """Every rule's id and title, under its section."""
    width = max((len(r.id) for r in rules), default=3)
    lines = [f"The rules the cockpit keeps ({DOC}); `cockpit rules ID` prints one."]
    section = None
    for rule in rules:
        if rule.section != section:
            section = rule.section
            lines += ["", section]
        room = WIDTH - width - 4
        title = rule.title if len(rule.title) <= room else rule.title[:room - 1] + "…"
        lines.append(f"  {rule.id:<{width}}  {title}")
    return "\n".join(lines)


def rule_text(rule: Rule) -> str:
    """One rule whole: its section, its text, where the cockpit applies it."""
    lines = [f"{rule.id} · {rule.section}" if rule.section else rule.id, ""]
    lines += textwrap.wrap(rule.text, WIDTH, break_on_hyphens=False)
    if rule.where:
        lines += ["", "Where the cockpit applies it:"]
        # Its edge rules ("Edge: ...") as a paragraph of their own.
        for at, paragraph in enumerate(re.split(r"\s+(?=Edge: )", rule.where)):
            lines += [""] * (at > 0) + textwrap.wrap(
                paragraph, WIDTH, break_on_hyphens=False,  # `verify-export` stays one word
                initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)


def find_rule(rules: list[Rule], wanted: str) -> Rule:
    """The rule named ``wanted`` ("D19", "d19" or "19"); InputError naming the ids."""
    key = wanted.strip().upper()
    if key.isdigit():
        key = "D" + str(int(key))
    for rule in rules:
        if rule.id.upper() == key:
            return rule
    span = f"{rules[0].id}–{rules[-1].id}" if rules else "none"
    raise InputError(f"cockpit rules: {wanted!r}: no such rule in {DOC} (the rules are "
                     f"{span}; `cockpit rules` lists them)")


def shipped_rules() -> list[Rule]:
    """The rules of the domain file the package carries."""
    from cockpit.assets import asset

    return parse_rules(asset("domain.md").read_text(encoding="utf-8"))


def cmd_rules(args: argparse.Namespace) -> int:
    rules = shipped_rules()
    if args.id is None:
        print(rule_list(rules))
    else:
        print(rule_text(find_rule(rules, args.id)))
    return EXIT_OK


def add_rules_command(sub: Any) -> None:
    p = sub.add_parser("rules", help="the domain rules the messages cite (D1–D24): the list, "
                                     "or one whole (reads only)")
    p.add_argument("id", nargs="?", default=None, metavar="ID",
                   help="a rule's id, e.g. D19 (default: list every rule with its title)")
    p.set_defaults(handler=cmd_rules)
