"""Turn a CSV file of purchases into a Parquet dataset, with each user's running total.

`CSVSource` reads the file as Bytewax's does; `stateful_map` keeps a running
total per user; `SparkSink` hands every micro-batch to Spark's Parquet
writer, with a fixed schema.  Run it with
`python -m flowspark.run flowspark.examples.file_to_parquet:flow`; the dataset goes to
`purchases.parquet` under the current directory (or to `$PURCHASES_PARQUET`).
"""

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import flowspark.operators as op
from flowspark.connectors.files import CSVSource
from flowspark.connectors.spark import SparkSink
from flowspark.dataflow import Dataflow

PURCHASES = Path(__file__).parent / "sample_data" / "purchases.csv"
OUT = os.environ.get("PURCHASES_PARQUET", "purchases.parquet")
SCHEMA = "user string, item string, amount double, at timestamp, user_total double"


def typed(row: Dict[str, str]) -> Dict[str, Any]:
    return {
        "user": row["user"],
        "item": row["item"],
        "amount": float(row["amount"]),
        "at": datetime.fromisoformat(row["at"]),
    }


def by_user(purchase: Dict[str, Any]) -> str:
    return str(purchase["user"])


def running_total(total: Optional[float], purchase: Dict[str, Any]) -> Tuple[float, Dict[str, Any]]:
    new_total = round((total or 0.0) + purchase["amount"], 2)
    return new_total, {**purchase, "user_total": new_total}


def unkeyed(item: Tuple[str, Dict[str, Any]]) -> Dict[str, Any]:
    return item[1]


flow = Dataflow("file_to_parquet")
purchases = op.map("typed", op.input("inp", flow, CSVSource(PURCHASES)), typed)
totals = op.stateful_map("running_total", op.key_on("by_user", purchases, by_user), running_total)
op.output("out", op.map("unkeyed", totals, unkeyed), SparkSink("parquet", {"path": OUT}, SCHEMA))
