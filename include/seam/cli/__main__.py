"""``python -m seam.cli``: the ``seam`` command."""

import sys

from seam.cli import main

sys.exit(main())
