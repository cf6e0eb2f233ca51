"""Planning: pure functions of the plan (and, for forecasts, of realized facts)."""
