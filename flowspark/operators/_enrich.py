"""`enrich_cached`: join items with slow-to-fetch side data through a TTL cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Dict, Generic, List, Tuple, TypeVar

from flowspark.dataflow import Stream, operator
from flowspark.operators._core import X, Y, flat_map_batch

DK = TypeVar("DK")
"""Type of the cache's keys."""

DV = TypeVar("DV")
"""Type of the cache's values."""


@dataclass
class TTLCache(Generic[DK, DV]):
    """A cache that refetches a value with `v_getter` once it is older than `ttl`."""

    v_getter: Callable[[DK], DV]
    now_getter: Callable[[], datetime]
    ttl: timedelta
    _cache: Dict[DK, Tuple[datetime, DV]] = field(default_factory=dict)

    def get(self, k: DK) -> DV:
        """The value for `k`, fetched (and timestamped) if missing or stale."""
        now = self.now_getter()
        hit = self._cache.get(k)
        if hit is not None and now - hit[0] <= self.ttl:
            return hit[1]
        v = self.v_getter(k)
        self._cache[k] = (now, v)
        return v

    def remove(self, k: DK) -> None:
        """Forget `k`, so the next `get` fetches it again; `KeyError` if absent."""
        del self._cache[k]


def _system_utc() -> datetime:
    return datetime.now(tz=timezone.utc)


@operator
def enrich_cached(
    step_id: str,
    up: Stream[X],
    getter: Callable[[DK], DV],
    mapper: Callable[[TTLCache[DK, DV], X], Y],
    ttl: timedelta = timedelta.max,
    _now_getter: Callable[[], datetime] = _system_utc,
) -> Stream[Y]:
    """Map each item with `mapper(cache, item)`, where `cache.get(k)` calls `getter`.

    Each worker keeps its own cache; a cached value is refetched once it is
    older than `ttl`, measured with one reading of `_now_getter` per batch.

    ```python
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    COUNTRIES = {"fr": "France", "jp": "Japan"}
    flow = Dataflow("enrich_cached_eg")
    codes = op.input("inp", flow, TestingSource(["fr", "jp", "fr"]))
    named = op.enrich_cached("country", codes, COUNTRIES.get, lambda cache, code: (code, cache.get(code)))
    out = []
    op.output("out", named, TestingSink(out))
    run_main(flow)
    assert out == [("fr", "France"), ("jp", "Japan"), ("fr", "France")]
    ```
    """
    cache_now = _now_getter()

    def batch_now() -> datetime:
        return cache_now

    cache = TTLCache(getter, batch_now, ttl)

    def shim_mapper(xs: List[X]) -> List[Y]:
        nonlocal cache_now
        cache_now = _now_getter()
        return [mapper(cache, x) for x in xs]

    return flat_map_batch("flat_map_batch", up, shim_mapper)
