"""The campaign journal: its event vocabulary, the append-only file, the fold into state,
and the one read path (this machine and its peers)."""
