"""``python -m adaptedge.cli``: the ``adaptedge`` command."""

import sys

from adaptedge.cli.main import main

sys.exit(main())
