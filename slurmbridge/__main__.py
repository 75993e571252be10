"""``python -m slurmbridge`` = the ``slurmbridge`` command."""

import sys

from slurmbridge.cli import main

sys.exit(main())
