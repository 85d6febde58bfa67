"""orchard.toml as text: a Config rendered as a commented file, and written.

Every key carries its help in its schema (`config._key`), so the file orchard
writes documents itself; a written file is re-validated, so it always loads.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import tomli_w

from orchard.lab.config.orchard_toml import LAUNCHERS_SECTION, SECTIONS, Config, from_dict
from orchard.lab.config.values import PLACEHOLDERS, range_note
from orchard.tomlfile import parse_toml


def render(config: Config) -> str:
    """The configuration as a readable, commented orchard.toml."""
    lines = [
        "# orchard.toml: the lab's configuration. Edit it freely: every run reads",
        "# and validates the whole file, and names each bad key or value.",
        "# Commands run through the shell. They may use these placeholders, each",
        "# replaced by a shell-quoted absolute path computed when a worker starts:",
    ]
    lines += [f"#   {{{name}}}: {meaning}" for name, meaning in PLACEHOLDERS.items()]
    for name, cls in SECTIONS.items():
        section = getattr(config, name)
        lines += ["", f"# {cls.__doc__}", f"[{name}]"]
        for spec in dataclasses.fields(cls):
            meta = spec.metadata
            note = meta["help"]
            if meta["choices"]:
                note += f" ({' | '.join(meta['choices'])})"
            note += range_note(meta) if meta["maximum"] is not None else ""
            lines += [f"# {part}" for part in textwrap.wrap(note, 86)]
            lines.append(tomli_w.dumps({spec.name: getattr(section, spec.name)}).rstrip("\n"))
    lines += ["", "# More launchers: a hypothesis may name one (`launcher = \"NAME\"`); each",
              "# [launchers.NAME] table takes the keys of [launcher]."]
    for launcher_name, launcher in config.launchers.items():
        lines += ["", tomli_w.dumps({LAUNCHERS_SECTION: {launcher_name: dataclasses.asdict(launcher)}}).rstrip("\n")]
    return "\n".join(lines) + "\n"


def write(config: Config, path: Path) -> None:
    """Write the configuration; the text is re-validated so a written file always loads."""
    text = render(config)
    from_dict(parse_toml(text.encode(), path, "configuration"), source=str(path))
    Path(path).write_text(text, encoding="utf-8")
