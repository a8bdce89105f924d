"""`python -m specd.daemon` is `specd` (how `specd start` runs the daemon with this same interpreter)."""

from specd.daemon.cli import main

raise SystemExit(main())
