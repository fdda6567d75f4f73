"""``python -m callwarden``."""

from callwarden.cli import main

raise SystemExit(main())
