"""A run's metric streams: the file readers, value types, the tail and the polled stream."""
