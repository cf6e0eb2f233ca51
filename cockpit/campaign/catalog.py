"""Built-in offer catalog: the IteraGPU rates of the source (D9, D10).

Prices are per package, for its whole duration (D8). The B200 package holds two
GPUs and its price is unknown until the campaign states it (D10).
"""

from __future__ import annotations

from decimal import Decimal

from cockpit.campaign.model import Offer
from cockpit.common.units import Money


def _usd(amount: str) -> Money:
    return Money(Decimal(amount), "USD")


BUILTIN_OFFERS: dict[str, Offer] = {
    offer.id: offer
    for offer in (
        Offer("rtx4090-3d", "RTX 4090", 1, 3, _usd("47.14")),
        Offer("rtx4090-7d", "RTX 4090", 1, 7, _usd("110")),
        Offer("rtx4090-30d", "RTX 4090", 1, 30, _usd("390")),
        Offer("b200-3d", "B200", 2, 3, None),
    )
}
