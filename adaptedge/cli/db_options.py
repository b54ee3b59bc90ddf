"""``--db-password-file``: the fleet store's password from a file, never the command line.

A ``postgresql://user:password@host/db`` URL puts the password in the process list (``ps``)
for every user of the machine. Give ``postgresql://user@host/db`` and the password in a file
(``--db-password-file``, first line) or as libpq reads it itself: ``PGPASSWORD``, or a
``PGPASSFILE`` / ``~/.pgpass`` file.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_option(parser: Any) -> None:
    parser.add_argument("--db-password-file", metavar="FILE",
                        help="the database password (first line of FILE; or PGPASSWORD / "
                        "~/.pgpass): never put it in the --db URL, which ps shows")


def db_password(args: argparse.Namespace) -> str | None:
    """The password of ``--db-password-file`` (None without one); warns, in one line, when
    the ``--db`` URL itself holds a password."""
    from sqlalchemy import make_url

    from adaptedge.cloud.access.acl import read_password_file
    from adaptedge.cloud.fleet.store import database_url

    if args.db is not None and make_url(database_url(args.db)).password is not None:
        print("adaptedge: warning: the --db URL holds a password, which every user of this "
              "machine can read in the process list: use --db-password-file or PGPASSWORD",
              file=sys.stderr)
    path = getattr(args, "db_password_file", None)
    return None if path is None else read_password_file(path)  # a CloudError: one line
