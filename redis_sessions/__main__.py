"""``python -m redis_sessions``: the same as the ``redis-sessions`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
