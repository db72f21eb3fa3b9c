"""`python -m tlmscore` runs the command line."""

from __future__ import annotations

import sys

from tlmscore.cli import main

sys.exit(main())
