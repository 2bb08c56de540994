"""mkdocs-jupyter's heavy imports, deferred to their first use.

Its plugin imports jupytext and nbconvert when it loads (about 0.7 s, a fifth of a build) but calls
nbconvert only to convert a notebook its cache does not hold, and jupytext only for Markdown notebooks,
which mkdocs.yml ignores. MkDocs imports the Markdown extensions before it loads the plugins, so
extension.py calls `defer()` first: a build whose notebooks are in the cache imports neither.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types

HEAVY = ("jupytext", "mkdocs_jupyter.convert")


class Deferred(types.ModuleType):
    """Stands in for a module until one of its names is read: then imports it and answers from it."""

    def __getattr__(self, attr):  # only for what the stand-in itself lacks
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def defer(names=HEAVY):
    """Each module named that is installed and not yet imported: a stand-in, imported when first used."""
    for name in names:
        if name in sys.modules:
            continue
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except ImportError:  # its package is not installed (the report needs no MkDocs)
            continue
        sys.modules[name] = Deferred(name)
