"""Count each user's clicks and join the totals with the users' names.

Two inputs are keyed by user id: `stateful_map` keeps a running click count
per user, and `join` pairs each user's name with the last count once the
input ends.  Run it with `python -m flowspark.run flowspark.examples.user_sessions:flow`.
"""

from typing import Dict, Optional, Tuple

import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

PROFILES = [
    {"user_id": "1", "name": "ada"},
    {"user_id": "2", "name": "grace"},
    {"user_id": "3", "name": "edsger"},
]
CLICKS = [
    {"user_id": "1", "page": "/home"},
    {"user_id": "2", "page": "/docs"},
    {"user_id": "1", "page": "/pricing"},
    {"user_id": "3", "page": "/home"},
    {"user_id": "1", "page": "/signup"},
]


def user_id(event: Dict[str, str]) -> str:
    return event["user_id"]


def name_of(profile: Dict[str, str]) -> str:
    return profile["name"]


def page_of(click: Dict[str, str]) -> str:
    return click["page"]


def count_clicks(seen: Optional[int], page: str) -> Tuple[int, int]:
    total = (seen or 0) + 1
    return total, total


def describe(pair: Tuple[str, Tuple[Optional[str], Optional[int]]]) -> str:
    uid, (name, clicks) = pair
    return f"user {uid} ({name}): {clicks or 0} clicks"


flow = Dataflow("user_sessions")
profiles = op.key_on("key_profiles", op.input("profiles", flow, TestingSource(PROFILES)), user_id)
names = op.map_value("name", profiles, name_of)
clicks = op.key_on("key_clicks", op.input("clicks", flow, TestingSource(CLICKS)), user_id)
running = op.stateful_map("count", op.map_value("page", clicks, page_of), count_clicks)
totals = op.join("join", names, running, insert_mode="last", emit_mode="final")
op.output("out", op.map("describe", totals, describe), StdOutSink())
