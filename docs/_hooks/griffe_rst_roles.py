"""Griffe extension: Sphinx roles in docstrings (``:func:`score```, ``:data:`~x.Y```) rendered as inline code,
and RST's ``double backtick`` literals as Markdown's single ones.

The code's numpy-style docstrings use Sphinx cross-reference roles; mkdocstrings renders Markdown, where a role
would show as raw text. Each role becomes inline code of its target (a ``~`` keeps only the last dotted part).
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|data|mod|meth|attr|exc|obj|const|ref|term):`(~?)([^`<]+?)(?:\s*<[^>]+>)?`")


#: RST inline literals; Markdown reads ``x`` as code in prose but not inside a parameter's type.
_DOUBLE = re.compile(r"``([^`]+)``")


def _replace(match: re.Match) -> str:
    target = match.group(2).strip()
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class RstRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = _ROLE.sub(_replace, obj.docstring.value)
            obj.docstring.value = _DOUBLE.sub(r"`\1`", text)
