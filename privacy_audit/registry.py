"""A name -> class registry whose classes are imported on first use.

``DEFENSES`` and the attack registries map config names to classes. Importing every
mechanism to build them cost seconds of CPU (torch, scipy.optimize, ...) in commands that
never train anything (``privacy-audit --help``, ``gate``, ``score``). Here an entry is a
``"module:Class"`` string until it is looked up, so listing or checking names imports
nothing, and a mechanism's module loads when a config names it. Otherwise it behaves as the
dict it replaces: ordered, ``in``, ``len``, iteration over names, item assignment and
deletion (tests register stand-ins), ``items()``/``values()`` (which import every entry).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any


class LazyRegistry(MutableMapping):
    """Ordered mapping ``name -> class``; a value given as ``"module:Class"`` is imported
    (once) when it is first looked up."""

    def __init__(self, entries: dict[str, Any] | None = None):
        self._entries: dict[str, Any] = dict(entries or {})

    def __getitem__(self, name: str) -> Any:
        value = self._entries[name]
        if isinstance(value, str):
            module, _, attr = value.partition(":")
            value = getattr(importlib.import_module(module), attr)
            self._entries[name] = value
        return value

    def __setitem__(self, name: str, value: Any) -> None:
        self._entries[name] = value

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def loaded(self) -> list[str]:
        """Names whose class has been imported (for tests of the laziness)."""
        return [n for n, v in self._entries.items() if not isinstance(v, str)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self._entries)!r})"


__all__ = ["LazyRegistry"]
