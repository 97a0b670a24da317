"""flowspark: Bytewax's dataflow API, executed by Apache Spark.

flowspark's messages go to the `flowspark` logger hierarchy and, as a
library's do, nowhere else until the application sets up logging
(`python -m flowspark.run` shows them on stderr).
"""

import logging

from flowspark._moved import install as _install_moved

logging.getLogger(__name__).addHandler(logging.NullHandler())
_install_moved()

__version__ = "0.1.0"
