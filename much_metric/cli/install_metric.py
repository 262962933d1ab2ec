"""``much install-metric``: make ``evaluate.load("much")`` work from any directory, offline.

Copies the metric script of the installed package into evaluate's module cache (``$HF_MODULES_CACHE``, default
``~/.cache/huggingface/modules``), where ``evaluate.load`` looks for modules it cannot find locally or on the hub.
``much_metric.load_metric()`` does the same on first use. Rerun after upgrading the package.

Before it has run, ``evaluate.load("much")`` fails with evaluate's own message "Couldn't find a module script at
.../much/much.py. Module 'much' doesn't exist on the Hugging Face Hub either." (the toolkit cannot change it).
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "install-metric", help='make evaluate.load("much") work from any directory, offline',
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--name", default="much", help="the name for evaluate.load (default: much)")
    parser.add_argument("--modules-cache", default=None,
                        help="evaluate's module cache (default: $HF_MODULES_CACHE or ~/.cache/huggingface/modules)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from much_metric.evaluate_module import install_metric

    path = install_metric(name=args.name, hf_modules_cache=args.modules_cache)
    print(f"installed {path}\nimport evaluate; metric = evaluate.load({args.name!r})")
    return 0
