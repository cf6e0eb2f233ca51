"""`python -m cockpit`: the same entry point as the `cockpit` console script."""

from cockpit.cli import main

if __name__ == "__main__":  # importing the module (e.g. the import hygiene test) runs nothing
    raise SystemExit(main())
