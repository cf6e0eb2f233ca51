"""The campaign plan: frozen model, offer catalog, and the located YAML loader.

Imports nothing outside the plan package but :mod:`cockpit.common.units` and
:mod:`cockpit.common.errors`: run code depends on the plan, never the other way round.
"""

from cockpit.campaign.catalog import BUILTIN_OFFERS
from cockpit.campaign.loader import load_campaign, load_campaign_text
from cockpit.campaign.model import (
    Campaign,
    ConclusionSpec,
    DeadlineSpec,
    Hook,
    Offer,
    Package,
    Resource,
    Run,
    Settings,
    Stage,
    StopRule,
)

__all__ = [
    "BUILTIN_OFFERS",
    "Campaign",
    "ConclusionSpec",
    "DeadlineSpec",
    "Hook",
    "Offer",
    "Package",
    "Resource",
    "Run",
    "Settings",
    "Stage",
    "StopRule",
    "load_campaign",
    "load_campaign_text",
]
