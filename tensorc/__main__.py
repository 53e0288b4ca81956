"""``python -m tensorc`` is the ``tensorc`` command."""

import sys

from tensorc.cli import main

sys.exit(main())
