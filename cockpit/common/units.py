"""Durations and money: parsing and exact, human formatting.

Money is a Decimal with its currency, never a float. A package is paid whole (D8):
nothing here divides a price by hours.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from functools import lru_cache

from cockpit.common.durations import format_duration as format_duration  # re-exported

_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# No duration in a campaign is longer than ten times the longest package of the catalog
# (30 days): far beyond any real plan, and far below what dates and timers overflow on.
MAX_DURATION_DAYS = 300
MAX_DURATION_S = MAX_DURATION_DAYS * 86400.0
DURATION_BOUND = (f"at most {MAX_DURATION_DAYS} days (10 × the longest package of the "
                  "catalog, 30 days)")
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])")


def parse_duration(text: str) -> float:
    """Parse "90m", "1h30m", "2d", "1.5h", "45s" into seconds; ValueError otherwise."""
    compact = text.strip().lower().replace(" ", "")
    if not compact:
        raise ValueError("empty duration")
    pos = 0
    total = 0.0
    for match in _DURATION_RE.finditer(compact):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(compact):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90m, 1h30m, 2d)")
    if total <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    if total > MAX_DURATION_S:
        raise ValueError(f"duration {text!r} is too long: {DURATION_BOUND}")
    return total


def format_hours(hours: float) -> str:
    """Hours as a short number: 48, 1.5, 0.25."""
    return f"{hours:.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Money:
    """An exact amount with its currency."""

    amount: Decimal
    currency: str

    @classmethod
    def parse(cls, amount: object, currency: str) -> Money:
        if isinstance(amount, bool) or not isinstance(amount, (int, float, str, Decimal)):
            raise ValueError(f"not an amount: {amount!r}")
        try:
            # str() first: a float such as 47.14 must become Decimal("47.14"), not its binary value.
            value = Decimal(str(amount).strip())
        except InvalidOperation as exc:
            raise ValueError(f"not an amount: {amount!r}") from exc
        if not value.is_finite() or value < 0:
            raise ValueError(f"amount must be a finite number >= 0: {amount!r}")
        return cls(value, currency.upper())

    def __mul__(self, count: int) -> Money:
        return Money(self.amount * count, self.currency)

    def __add__(self, other: Money) -> Money:
        if other.currency != self.currency:
            raise ValueError(f"cannot add {other.currency} to {self.currency}")
        return Money(self.amount + other.amount, self.currency)

    def split(self, parts: int) -> Money:
        """The share of one of ``parts`` equal parts, rounded to the cent."""
        share = (self.amount / parts).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
        return Money(share, self.currency)

    def as_json(self) -> dict[str, str]:
        return {"amount": plain_amount(self.amount), "currency": self.currency}

    def __str__(self) -> str:
        return f"{plain_amount(self.amount)} {self.currency}"


# One other cost (D20) above this, in any currency, is a typo or a wrong unit (a
# package costs 47 to a few thousand): `cockpit cost` refuses it, and a journal line
# holding one is not folded. A real cost that large is recorded in parts.
MAX_OTHER_COST = Decimal(100_000)


def other_cost(label: object, amount: object, currency: object) -> Money:
    """The one check of an other cost (D20), for `cockpit cost` and for every journal
    line: a label, a finite amount from 0 to ``MAX_OTHER_COST``. ValueError says why."""
    try:
        money = _other_amount(amount, currency)
    except TypeError:  # an unhashable amount or currency (a list): not remembered
        money = _other_amount.__wrapped__(amount, currency)
    if not isinstance(label, str) or not label.strip():
        raise ValueError("the label is empty")
    return money


# A journal repeats the same few amounts (a storage fee each day): each is parsed once.
# ``typed``: 1, 1.0 and True are different inputs (True is refused).
@lru_cache(maxsize=256, typed=True)
def _other_amount(amount: object, currency: object) -> Money:
    if not isinstance(currency, str) or not currency.strip():
        raise ValueError(f"not a currency: {currency!r}")
    try:
        money = Money.parse(amount if not isinstance(amount, str) else amount.strip(),
                            currency.strip())
    except InvalidOperation as exc:  # pragma: no cover - Money.parse turns it into ValueError
        raise ValueError(f"not an amount: {amount!r}") from exc
    if money.amount > MAX_OTHER_COST:
        raise ValueError(f"amount {plain_amount(money.amount)} {money.currency} is above "
                         f"{plain_amount(MAX_OTHER_COST)}, the most one cost entry may hold "
                         "(a typo or a wrong unit? record a real one in parts)")
    return money


def plain_amount(value: Decimal) -> str:
    """47.14 -> "47.14", 110 -> "110", 94.280 -> "94.28": no exponent, no trailing zeros."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if "." in text and len(text.split(".")[1]) == 1:
        text += "0"
    return text


def format_percent(value: float | None, decimals: int = 0) -> str:
    """``12%``, or ``—`` while there is no real figure yet (a first CPU sample)."""
    return "—" if value is None else f"{value:.{decimals}f}%"


def format_share(share: float | None, digits: int = 1) -> str:
    """A share (0 to 1) as a person reads it: ``4.4 %``; above 0 but rounding to 0,
    ``<0.1 %``; None (no whole to share): ``unknown``."""
    if share is None:
        return "unknown"
    pct = round(share * 100, digits)
    if share > 0 and pct == 0:
        return f"<{10 ** -digits:g} %"
    return f"{pct:.{digits}f} %"


def for_packages(count: int) -> str:
    """``for the package`` / ``for 2 packages``: a price always covers whole packages (D8)."""
    return "for the package" if count == 1 else f"for {count} packages"


def format_bytes(n: float) -> str:
    """Short binary size, e.g. '3.2 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - loop always returns


def format_count(value: float | int | None) -> str:
    """A count for people: ``950``, ``12,400``, ``184k``, ``1.2M`` (never ``1e+04``)."""
    if value is None:
        return "-"
    n = float(value)
    if not math.isfinite(n):
        return str(n)
    a = abs(n)
    if a < 100_000:
        return f"{n:,.0f}"
    if a < 10_000_000:
        return f"{n / 1000:,.0f}k"
    if a < 1e9:
        return f"{n / 1e6:.1f}M"
    if a < 1e12:
        return f"{n / 1e9:,.1f}G"
    mantissa, exponent = f"{n:.3g}".split("e")  # a diverging loss: 4.02e19, not digits
    return f"{mantissa}e{int(exponent)}"


def format_number(value: object) -> str:
    """A metric value for people: 4 significant digits, whole numbers with separators
    (a record count reads ``12,345``, not ``1.234e+04``), tiny values in e-notation,
    huge ones too (:func:`format_count`: a diverging loss reads ``4.02e19``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    v = float(value)
    if not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    a = abs(v)
    if a >= 1e4:
        return format_count(v) if v.is_integer() or a >= 1e5 else f"{v:,.1f}"
    if v.is_integer():
        return f"{v:.0f}"
    if a < 1e-3:
        return f"{v:.2e}"
    return f"{v:.4g}"


def format_rate(steps_per_s: float | None) -> str:
    """Throughput: ``3.4 step/s``; slow runs per minute or hour."""
    if steps_per_s is None or steps_per_s <= 0:
        return "-"
    if steps_per_s >= 100:
        return f"{steps_per_s:,.0f} step/s"
    if steps_per_s >= 0.1:
        return f"{steps_per_s:.3g} step/s"
    if steps_per_s * 60 >= 0.1:
        return f"{steps_per_s * 60:.3g} step/min"
    return f"{steps_per_s * 3600:.3g} step/h"
