"""``python -m adaptedge_cli``: the ``adaptedge`` command."""

import sys

from adaptedge_cli.main import main

sys.exit(main())
