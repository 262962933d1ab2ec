"""The toolkit's version: the one source, read by ``setup.cfg`` (``attr:``), ``much_dataset``, ``much_metric`` and
``much --version``."""

__version__ = "0.1.0"
