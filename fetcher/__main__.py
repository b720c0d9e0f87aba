"""``python -m fetcher``: see :mod:`fetcher.cli`."""

from __future__ import annotations

import sys

from fetcher.cli import main

if __name__ == "__main__":
    sys.exit(main())
