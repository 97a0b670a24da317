"""Rows as the Spark connectors hand them over: `dict`s by column name, with an optional schema."""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

from pyspark.sql.types import StructType

Row = Dict[str, Any]
"""One row of a Spark source or sink, by column name."""

Schema = Union[str, StructType, None]
"""A Spark schema as a DDL string (`"name string, n long"`), a `StructType`, or none."""


def first_line(ex: BaseException) -> str:
    """The first line of an error's message (Spark's run on for pages), or its type's name."""
    return str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__


def struct(schema: Schema, spark: Any) -> Optional[StructType]:
    """`schema` as a `StructType`: a DDL string is parsed by the session `spark` (classic or Spark Connect alike)
    as `createDataFrame` takes it, so a lone type (`"string"`) is one column named `value`."""
    if not isinstance(schema, str):
        return schema
    parsed: StructType = spark.createDataFrame([], schema).schema
    return parsed
