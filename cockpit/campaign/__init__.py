"""The campaign plan: frozen model, offer catalog, and the located YAML loader."""

from cockpit.campaign import sections as _sections  # noqa: F401  (registers sections)
from cockpit.campaign.catalog import BUILTIN_OFFERS
from cockpit.campaign.loader import load_campaign
from cockpit.campaign.model import (
    Campaign,
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
    "Offer",
    "Package",
    "Resource",
    "Run",
    "Settings",
    "Stage",
    "StopRule",
    "load_campaign",
]

# The closing sections (acceptance checks, conclusion, deadline) register themselves too.
from cockpit import acceptance as _acceptance  # noqa: E402, F401
from cockpit import conclusion as _conclusion  # noqa: E402, F401
