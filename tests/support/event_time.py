"""The instant event time starts from in the windowing tests (and the other tests that build windows)."""

from __future__ import annotations

from datetime import datetime, timezone

ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)
"""The instant the windowing tests align their windows on and count event time from."""
