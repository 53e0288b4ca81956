"""``python -m tensorc`` is the ``tensorc`` command."""

import sys

from tensorc.cli.main import main

sys.exit(main())
