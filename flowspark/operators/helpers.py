"""Small helpers for writing operator functions."""

from __future__ import annotations

from typing import Callable, Dict, TypeVar

K = TypeVar("K")
"""Type of the dict's keys."""

V = TypeVar("V")
"""Type of the dict's values."""


def map_dict_value(key: K, mapper: Callable[[V], V]) -> Callable[[Dict[K, V]], Dict[K, V]]:
    """A function that replaces `d[key]` with `mapper(d[key])` and returns `d`.

    Meant for `op.map`, to change one field of dict items; the dict is
    updated in place.
    """

    def shim_mapper(obj: Dict[K, V]) -> Dict[K, V]:
        obj[key] = mapper(obj[key])
        return obj

    return shim_mapper
