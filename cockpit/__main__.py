"""`python -m cockpit`: the same entry point as the `cockpit` console script."""

from cockpit.cli import main

raise SystemExit(main())
