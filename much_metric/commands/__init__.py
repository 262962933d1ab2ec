"""Subcommands of the ``much`` CLI (see :mod:`much_metric.cli`)."""
