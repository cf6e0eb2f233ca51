"""Engine tests: the tick, guards and actions against real processes or fakes at the edge."""
