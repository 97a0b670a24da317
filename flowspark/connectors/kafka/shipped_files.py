"""Certificate and key files named in Kafka settings, found where Spark shipped them.

A cluster's executors rarely share the driver's folders, so a flow that
talks to Kafka over TLS or Kerberos ships its files with the job
(`--conf spark.files=/path/ca.pem,/path/client.key`) and names each by
its file name in `add_config`.  Spark copies shipped files into every
executor's (and the driver's) own folder; `with_shipped_files` turns such
a relative name into the path of that copy wherever the settings are
used, so one `add_config` serves every machine:

>>> with_shipped_files({"ssl.ca.location": "/etc/ssl/ca.pem", "acks": "all"})
{'ssl.ca.location': '/etc/ssl/ca.pem', 'acks': 'all'}
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

FILE_SETTINGS = frozenset(
    {
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.crl.location",
        "sasl.kerberos.keytab",
    }
)
"""librdkafka settings whose value is the path of a file."""


def _spark_files_folder() -> Optional[str]:
    """The folder Spark copied the job's shipped files into, in a Spark task or a driver with a Spark context; else
    `None`."""
    from pyspark import SparkContext, SparkFiles

    if SparkFiles._is_running_on_worker:
        return SparkFiles._root_directory
    if SparkContext._active_spark_context is not None:
        return SparkFiles.getRootDirectory()
    return None


def with_shipped_files(config: Dict[str, Any]) -> Dict[str, Any]:
    """`config` with each relative file path that does not exist from here replaced by Spark's copy of that file, where
    there is one."""
    relative = [
        key
        for key in FILE_SETTINGS
        if isinstance(config.get(key), str)
        and config[key]
        and not os.path.isabs(config[key])
        and not os.path.exists(config[key])
    ]
    if not relative:
        return config
    folder = _spark_files_folder()
    if folder is None:
        return config
    found = {
        key: os.path.join(folder, config[key]) for key in relative if os.path.exists(os.path.join(folder, config[key]))
    }
    return {**config, **found}
