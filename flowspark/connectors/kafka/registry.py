"""Confluent Schema Registry (de)serializers that travel to Spark's workers.

Bytewax's recipe, `kop.deserialize_value("de", msgs,
AvroDeserializer(SchemaRegistryClient(conf)))`, can't run on Spark: a
step's functions are pickled to reach the executors, and Confluent's
client holds an `SSLContext` and its (de)serializers a lock, neither of
which pickles.  `RegistryAvroSerializer` and `RegistryAvroDeserializer`
take the same arguments as Confluent's `AvroSerializer` and
`AvroDeserializer`, except that the registry is given by its
configuration; they pickle as that configuration and build Confluent's
client and (de)serializer in each process that first uses them, so the
same step runs in the user's process or in Spark's tasks:

    from flowspark.connectors.kafka.registry import RegistryAvroDeserializer

    decoded = kop.deserialize_value("de", msgs, RegistryAvroDeserializer("http://registry:8081"))

Messages have Confluent's framing (a zero magic byte, the schema id as 4
big-endian bytes, then the Avro bytes) and are byte for byte what
Confluent's own classes make.  A registry given by its URL or
configuration dict gets one client per process (`registry_client`), which
every wrapper naming the same configuration shares, with its cache of
schemas; Confluent's in-memory `mock://` registry is therefore one per
process and URL.  Where each executor needs its own settings (certificate
files at different paths, credentials read there), give a function that
returns the client instead: it is called in each process, once per wrapper.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, Hashable, Mapping, Optional, Tuple, Union

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import Deserializer, SerializationContext, Serializer

__all__ = ["Registry", "RegistryAvroDeserializer", "RegistryAvroSerializer", "registry_client"]

Registry = Union[str, Mapping[str, Any], Callable[[], SchemaRegistryClient]]
"""Where the schemas are: a URL, a `SchemaRegistryClient` configuration, or a function returning a client."""

ToDict = Callable[[Any, SerializationContext], Dict[str, Any]]
"""Confluent's `to_dict`: turns an object into the dict the schema describes."""

FromDict = Callable[[Dict[str, Any], SerializationContext], Any]
"""Confluent's `from_dict`: turns a decoded dict into an object."""

_CHECK_REGISTRY = {"url": "mock://flowspark-argument-check"}
"""A registry in memory, for Confluent's classes to check their other arguments against when a wrapper is made."""

_clients: Dict[Tuple[Tuple[str, Hashable], ...], SchemaRegistryClient] = {}
_clients_lock = threading.Lock()


def _config(registry: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    return {"url": registry} if isinstance(registry, str) else dict(registry)


def registry_client(registry: Registry) -> SchemaRegistryClient:
    """This process's client for `registry`: the one the wrappers here use, made on first use.

    A URL or configuration names one shared client per process; a function
    is called (the wrappers call it once each).  Use it to register schemas
    or to look at what the wrappers registered, in tests with a `mock://`
    URL above all.
    """
    if callable(registry):
        return registry()
    config = _config(registry)
    try:
        key = tuple(sorted(config.items()))
        hash(key)
    except TypeError:
        # A setting that can't be a key (a dict, a callback): a client of its own.
        return SchemaRegistryClient.new_client(config)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = SchemaRegistryClient.new_client(config)
        return client


def _checked(registry: Registry) -> Registry:
    """`registry`, if it can name a registry at all (its settings are checked when a process first uses it)."""
    if isinstance(registry, str) or callable(registry):
        return registry
    if isinstance(registry, Mapping):
        if "url" not in registry:
            msg = f"the schema registry configuration has no `url`: {sorted(registry)}"
            raise ValueError(msg)
        return dict(registry)
    msg = f"registry must be a URL, a SchemaRegistryClient configuration or a function returning a client; got {registry!r}"
    raise TypeError(msg)


class _OnEachWorker(ABC):
    """A Confluent (de)serializer's arguments, and the one built from them in this process.

    Pickles as the arguments alone: unpickled, it builds its own on first
    use.  Made, it builds one against an in-memory registry at once, so
    that Confluent's checks of the other arguments fail where the flow is
    defined.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = _checked(registry)
        self._built: Any = None
        self._lock = threading.Lock()

    def _check(self) -> None:
        self._build(registry_client(_CHECK_REGISTRY))

    @abstractmethod
    def _build(self, client: SchemaRegistryClient) -> Any:
        """Confluent's (de)serializer for these arguments, on `client`."""

    def _ready(self) -> Any:
        built = self._built
        if built is None:
            with self._lock:
                if self._built is None:
                    self._built = self._build(registry_client(self.registry))
                built = self._built
        return built

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        del state["_built"], state["_lock"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._built = None
        self._lock = threading.Lock()


class RegistryAvroSerializer(_OnEachWorker, Serializer):
    """Confluent's `AvroSerializer`, made in each process that uses it; pickles as its arguments.

    The arguments are `AvroSerializer`'s, with the registry given by its
    URL, configuration or a function returning a client (see the module's
    docstring).  `schema_str`, `to_dict` and `conf` are checked when it is
    made; the registry is first reached when a message is serialized.
    `to_dict` must pickle (a module-level function or a lambda does).

    As with Confluent's class, the subject is named after the message's
    topic by default: give `KafkaSinkMessage`s their `topic`, or set
    `subject.name.strategy` in `conf`.
    """

    def __init__(
        self,
        registry: Registry,
        schema_str: Union[str, Schema, None] = None,
        to_dict: Optional[ToDict] = None,
        conf: Optional[Dict[str, Any]] = None,
        rule_conf: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(registry)
        self.schema_str = schema_str
        self.to_dict = to_dict
        self.conf = None if conf is None else dict(conf)
        self.rule_conf = None if rule_conf is None else dict(rule_conf)
        self._check()

    def _build(self, client: SchemaRegistryClient) -> AvroSerializer:
        serializer: AvroSerializer = AvroSerializer(client, self.schema_str, self.to_dict, self.conf, self.rule_conf)
        return serializer

    def __call__(self, obj: object, ctx: Optional[SerializationContext] = None) -> Optional[bytes]:
        """`obj` in Confluent's framing: magic byte, schema id, Avro bytes (`None` for `None`)."""
        encoded: Optional[bytes] = self._ready()(obj, ctx)
        return encoded


class RegistryAvroDeserializer(_OnEachWorker, Deserializer):
    """Confluent's `AvroDeserializer`, made in each process that uses it; pickles as its arguments.

    The arguments are `AvroDeserializer`'s, with the registry given as for
    `RegistryAvroSerializer`.  The writer's schema comes from the registry
    by the id in each message; `schema_str`, if given, is the reader's
    schema.  `from_dict` must pickle.
    """

    def __init__(
        self,
        registry: Registry,
        schema_str: Union[str, Schema, None] = None,
        from_dict: Optional[FromDict] = None,
        return_record_name: bool = False,
        conf: Optional[Dict[str, Any]] = None,
        rule_conf: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(registry)
        self.schema_str = schema_str
        self.from_dict = from_dict
        self.return_record_name = return_record_name
        self.conf = None if conf is None else dict(conf)
        self.rule_conf = None if rule_conf is None else dict(rule_conf)
        self._check()

    def _build(self, client: SchemaRegistryClient) -> AvroDeserializer:
        deserializer: AvroDeserializer = AvroDeserializer(
            client, self.schema_str, self.from_dict, self.return_record_name, self.conf, self.rule_conf
        )
        return deserializer

    def __call__(self, value: Optional[bytes], ctx: Optional[SerializationContext] = None) -> object:
        """The object `value` encodes (`None` for `None`); Confluent's `SerializationError` for bytes not in its framing."""
        return self._ready()(value, ctx)
