"""JSON export: the same document `--json` prints (schema orchard.verdict/1)."""

from __future__ import annotations

import json
from typing import Any


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
