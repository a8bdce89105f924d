"""`python -m daemon` is `specd` (how `specd start` runs the daemon with this same interpreter)."""

from daemon.cli import main

raise SystemExit(main())
