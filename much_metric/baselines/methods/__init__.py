"""The built-in baselines, one module per method, each defining ``BASELINES = (Baseline(...), ...)``.

The registry (:mod:`much_metric.baselines.registry`) lists this package on its first use and imports every module
not starting with ``_``; adding a method is adding a module here. The user-facing functions (``token_entropy``,
``ccp``, ``sar``, ``ktc`` ...) are re-exported by :mod:`much_metric.baselines`.
"""
