"""The data source Spark knows as format `flowspark`: its name, its rows' schema, its class.

Spark unpickles the class in a planner process of its own that asks only
for the source's name and schema, while the query is being set up.  This
module is all that process imports; the reader, and everything it uses,
loads where Spark asks for one (`spark_source`).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

FORMAT = "flowspark"
SCHEMA_DDL = "grp string, seq long, kind int, payload binary"
"""The rows of every Spark stage (`chunks`), in Spark's words."""

SCHEMA = StructType(
    [
        StructField("grp", StringType()),
        StructField("seq", LongType()),
        StructField("kind", IntegerType()),
        StructField("payload", BinaryType()),
    ]
)
"""`SCHEMA_DDL` as a type, which a Spark Connect client can use without asking its server to parse DDL."""


class FlowsparkSource(DataSource):
    """The flow's inputs, as Spark's streaming data source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        # Imported here so that the process that only asks for the schema
        # does not load the reader's modules (Arrow, the planner, ...).
        from flowspark.engine.sources.spark_source import Reader

        return Reader(dict(self.options))
