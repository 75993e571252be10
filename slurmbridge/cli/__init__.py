"""The ``slurmbridge`` command: :mod:`.main` parses and dispatches; one module per command
family (``run``/``sim``/``streams`` in :mod:`.run`, the log commands in :mod:`.logs`).
"""
