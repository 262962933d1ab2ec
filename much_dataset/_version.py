"""The toolkit's version: the one source, read by ``pyproject.toml`` (``[tool.setuptools.dynamic]``),
``much_dataset``, ``much_metric`` and ``much --version``."""

__version__ = "0.1.0"
