"""RocksDB's native library, unpacked once per machine rather than once per run.

The state store loads RocksDB's JNI library from its jar.  Every run on a
local master unpacked the 15 MB `librocksdbjni-linux64.so` into a new file
in the temporary directory, readable by every local user, and a JVM that
does not exit normally leaves that file behind (a machine that ran this
project's tests held over a hundred of them).  RocksDB first looks for the
library on the JVM's library path, so flowspark unpacks it once into a
private cache folder named after the jar, and puts that folder on the
driver's library path (`spark.driver.extraLibraryPath`).
"""

from __future__ import annotations

import glob
import hashlib
import os
import platform
import tempfile
import zipfile
from typing import Optional

from flowspark import _settings as settings
from flowspark.engine.spark import install_cache
from flowspark.engine.util.private_files import make_dirs, others_can_write

LIBRARY = "librocksdbjni-linux64.so"
"""The library RocksDB's loader asks the JVM for first on x86-64 Linux (glibc)."""


def rocksdb_library_dir(spark_home: Optional[str]) -> Optional[str]:
    """A private folder holding Spark's RocksDB library, unpacked if need be; `None` where that can't be done."""
    if (
        spark_home is None
        or platform.system() != "Linux"
        or platform.machine() != "x86_64"
        or platform.libc_ver()[0] != "glibc"
    ):
        return None
    jars = glob.glob(os.path.join(spark_home, "jars", "rocksdbjni-*.jar"))
    if len(jars) != 1:
        return None
    try:
        return _unpacked(jars[0])
    except (OSError, zipfile.BadZipFile, KeyError):
        return None


def _unpacked(jar: str) -> Optional[str]:
    facts = os.stat(jar)
    digest = hashlib.sha256(f"{os.path.realpath(jar)}:{facts.st_size}:{facts.st_mtime_ns}".encode()).hexdigest()[:16]
    folder = settings.cache_folder("native", f"rocksdbjni-{digest}")
    make_dirs(folder)
    if others_can_write(folder):
        return None
    library = os.path.join(folder, LIBRARY)
    if os.path.isfile(library) and not others_can_write(library):
        install_cache.ensure_recorded(folder, os.path.realpath(jar))
        return folder
    with zipfile.ZipFile(jar) as archive, archive.open(LIBRARY) as packed:
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                while block := packed.read(1 << 20):
                    out.write(block)
            os.chmod(temporary, 0o500)
            os.replace(temporary, library)
        except BaseException:
            os.remove(temporary)
            raise
    install_cache.record(folder, os.path.realpath(jar))
    install_cache.remove_orphans(os.path.dirname(folder), "rocksdbjni-")
    return folder
