"""`python -m specd.cli` is `specd` (how `specd start` runs the daemon with this same interpreter)."""

from specd.cli.main import main

raise SystemExit(main())
