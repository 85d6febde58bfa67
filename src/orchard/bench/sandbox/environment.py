"""The isolated environment every measured command runs in.

Measurements must not depend on whoever launched them: the user's git config,
locale, pager, colour settings or time zone would all change what a CLI
prints and how long it takes. Only an allowlist of variables passes through;
everything that shapes output is pinned.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Bump when the pinned set below changes: rows with different versions are
# not comparable (it is one of the comparability keys). 2: nothing named after
# orchard, names or values (a measured program must not tell it is measured).
ENV_ISOLATION_VERSION = "2"

PASSED_THROUGH = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)

AUTHOR_NAME = "A U Thor"  # git's own test identity: nothing a program could read as "measured"
AUTHOR_EMAIL = "author@example.com"
FIXED_DATE = "2026-01-01T00:00:00Z"


def isolated_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment for a measured command.

    `extra` is applied last, so a suite or lane can add what its command needs.
    """
    env = {key: os.environ[key] for key in PASSED_THROUGH if key in os.environ}
    env.update(
        {
            "LC_ALL": "C",
            "LANG": "C",
            "TZ": "UTC",
            "NO_COLOR": "1",
            "CLICOLOR": "0",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": AUTHOR_NAME,
            "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
            "GIT_COMMITTER_NAME": AUTHOR_NAME,
            "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
            "GIT_AUTHOR_DATE": FIXED_DATE,
            "GIT_COMMITTER_DATE": FIXED_DATE,
            "OAK_AUTHOR": AUTHOR_NAME,
            "OAK_NO_UPDATE_CHECK": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    if extra:
        env.update(extra)
    return env

