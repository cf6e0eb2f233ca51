"""cockpit: a terminal cockpit for a GPU training campaign on a rented machine."""

__version__ = "0.1.0"
