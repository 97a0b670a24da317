"""Avro without a schema registry, with Bytewax's names: `PlainAvroSerializer` and `PlainAvroDeserializer`.

Both encode or decode bare Avro binary (on `fastavro`) with a schema you
give them; there is no framing.  Confluent's
`confluent_kafka.schema_registry.avro.AvroSerializer` writes a magic byte
and a schema id ahead of the Avro bytes, which these neither write nor
expect: for messages in that format use
`flowspark.connectors.kafka.registry`.  Either kind plugs into
`kop.serialize*` and `kop.deserialize*`.

They pickle as their parsed schema, so steps using them run in Spark's
tasks.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, Optional, Union

from confluent_kafka.schema_registry import Schema
from confluent_kafka.serialization import Deserializer, SerializationContext, Serializer
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.types import NamedSchemas
from fastavro.types import Schema as ParsedSchema

__all__ = ["PlainAvroDeserializer", "PlainAvroSerializer"]


def _parsed(schema: Union[str, Schema], named_schemas: Optional[Dict[str, Any]]) -> ParsedSchema:
    """`schema` (JSON text, or a registry `Schema` holding it) parsed by fastavro, resolving names in `named_schemas`."""
    text = schema.schema_str if isinstance(schema, Schema) else schema
    if text is None:
        msg = "the schema holds no schema text (`schema_str` is None)"
        raise TypeError(msg)
    names: Optional[NamedSchemas] = named_schemas
    return parse_schema(json.loads(text), named_schemas=names)


class PlainAvroSerializer(Serializer):
    """Encode objects as bare Avro binary with a fixed schema (no magic byte, no schema id).

    :arg schema: the Avro schema, as JSON text or a
        `confluent_kafka.schema_registry.Schema`.
    :arg named_schemas: schemas that `schema` refers to by name, as
        `fastavro.parse_schema` takes them (it also adds the names it
        parses to this dict).
    """

    def __init__(self, schema: Union[str, Schema], named_schemas: Optional[Dict[str, Any]] = None) -> None:
        self.schema = _parsed(schema, named_schemas)

    def __call__(self, obj: Optional[object], ctx: Optional[SerializationContext] = None) -> Optional[bytes]:
        """The Avro bytes of `obj`; fastavro's error (`ValueError`, `TypeError`) if it does not fit the schema."""
        out = io.BytesIO()
        schemaless_writer(out, self.schema, obj)
        return out.getvalue()


class PlainAvroDeserializer(Deserializer):
    """Decode bare Avro binary written with a fixed schema (no magic byte, no schema id).

    Framed messages (Confluent's registry format) do not decode: their
    first five bytes are read as Avro data.  Bytes after the first value
    are ignored.

    :arg schema: the writer's Avro schema, as JSON text or a
        `confluent_kafka.schema_registry.Schema`.
    :arg named_schemas: as for `PlainAvroSerializer`.
    """

    def __init__(self, schema: Union[str, Schema], named_schemas: Optional[Dict[str, Any]] = None) -> None:
        self.schema = _parsed(schema, named_schemas)

    def __call__(self, value: Optional[bytes], ctx: Optional[SerializationContext] = None) -> Optional[object]:
        """The value decoded from `value` (a `str` is taken as its UTF-8 bytes); `None` is a `ValueError`."""
        if value is None:
            msg = "Can't deserialize None data"
            raise ValueError(msg)
        data = value.encode() if isinstance(value, str) else value
        decoded: object = schemaless_reader(io.BytesIO(data), self.schema, None)
        return decoded
