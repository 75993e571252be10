"""``python -m slurmbridge`` = the ``slurmbridge`` command."""

import sys

from slurmbridge.cli.main import main

sys.exit(main())
