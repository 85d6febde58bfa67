"""orchard.toml as text: a Config rendered as a short commented file, and written; every key's reference.

The file orchard writes holds what a lab must decide (YOURS) and whatever
differs from its default, each key with its help: a new user edits a dozen
lines, and no key name appears twice for a search-and-replace to hit the
wrong one. Every other key is named under its section and described, with
its default, in docs/configuration.md (`reference()`, checked by a test);
every key carries its help in its schema (`config._key`). A written file is
re-validated, so it always loads.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import typing
from pathlib import Path
from typing import Any

import tomli_w

from orchard.lab.config.orchard_toml import LAUNCHERS_SECTION, SECTIONS, Config, from_dict
from orchard.lab.config.prices import DEFAULT_PRICES, PRICES_SECTION, UNNAMED, ModelPrice
from orchard.lab.config.values import PLACEHOLDERS, choices, range_note
from orchard.tomlfile import parse_toml

# What a new lab must decide; every other key has a default that works.
YOURS = {"target": ("repo", "build", "test", "binary"), "bench": ("suite",), "launcher": ("name",)}
REFERENCE = "docs/configuration.md"


def render(config: Config) -> str:
    """The configuration as a short, commented orchard.toml."""
    lines = [
        "# orchard.toml: the lab's configuration. Edit it freely: every run reads",
        "# and validates the whole file, and names each bad key or value. Here is what",
        "# a lab must set and what differs from the defaults; each section names its",
        f"# other keys, described with their defaults in orchard's {REFERENCE}.",
        "# Commands run through the shell. They may use these placeholders, each",
        "# replaced by a shell-quoted absolute path computed when a worker starts:",
    ]
    lines += [f"#   {{{name}}}: {meaning}" for name, meaning in PLACEHOLDERS.items()]
    for name, cls in SECTIONS.items():
        section = getattr(config, name)
        hints = typing.get_type_hints(cls)
        written = [spec for spec in dataclasses.fields(cls)
                   if spec.name in YOURS.get(name, ()) or _differs(section, spec)]
        lines += ["", f"# {cls.__doc__}", f"[{name}]"]
        for spec in written:
            lines += [f"# {part}" for part in textwrap.wrap(_note(spec, hints), 86)]
            lines.append(tomli_w.dumps({spec.name: getattr(section, spec.name)}).rstrip("\n"))
        others = [spec.name for spec in dataclasses.fields(cls) if spec not in written]
        if others:
            lines += [f"# {part}" for part in textwrap.wrap(f"also: {', '.join(others)}", 86)]
    lines += ["", "# More launchers: a hypothesis may name one (`launcher = \"NAME\"`); each",
              "# [launchers.NAME] table takes the keys of [launcher]."]
    for launcher_name, launcher in config.launchers.items():
        table = {spec.name: getattr(launcher, spec.name) for spec in dataclasses.fields(launcher)
                 if spec.name == "name" or _differs(launcher, spec)}
        lines += ["", tomli_w.dumps({LAUNCHERS_SECTION: {launcher_name: table}}).rstrip("\n")]
    if config.prices:
        lines += ["", "# What a model's tokens cost (USD per million), over orchard's own table: a cost worked out",
                  "# from them is shown as estimated.",
                  tomli_w.dumps({PRICES_SECTION: {m: dataclasses.asdict(p) for m, p in config.prices.items()}})]
    return "\n".join(lines).rstrip("\n") + "\n"


def reference() -> str:
    """Every key of orchard.toml with its default and meaning: the text of docs/configuration.md."""
    lines = ["# orchard.toml: every key", "",
             "`orchard init` writes a short orchard.toml: the keys a lab must set "
             f"({', '.join(f'`{s}.{k}`' for s, keys in YOURS.items() for k in keys)}) and those that differ "
             "from their defaults. Every key, with its default, is below; add any of them under its section. "
             "This page is generated from the schema (`orchard.lab.config.rendered.reference`), and a test "
             "checks it is current.", "",
             "Commands run through the shell and may use these placeholders, each replaced by a shell-quoted "
             "absolute path computed when a worker starts:", ""]
    lines += [f"- `{{{name}}}`: {meaning}" for name, meaning in PLACEHOLDERS.items()]
    for name, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        lines += ["", f"## [{name}]", "", str(cls.__doc__), "", "| key | default | meaning |", "|---|---|---|"]
        for spec in dataclasses.fields(cls):
            cell = _note(spec, hints).replace("|", "\\|")
            lines.append(f"| `{spec.name}` | `{json.dumps(_default(spec))}` | {cell} |")
    lines += ["", f"## [{LAUNCHERS_SECTION}.NAME]", "",
              "More launchers: a hypothesis may name one (`launcher = \"NAME\"`); each table takes the keys of "
              "`[launcher]`."]
    lines += ["", f"## [{PRICES_SECTION}.\"MODEL\"]", "", f"{ModelPrice.__doc__} A launcher whose CLI prints tokens "
              "and no cost (codex) has its cost worked out from them at its `model`'s price (no `model`: the "
              f"`{UNNAMED}` entry), shown as estimated; a table here replaces orchard's entry or adds one, every key "
              "required:", "", "| key | meaning |", "|---|---|"]
    lines += [f"| `{spec.name}` | {_note(spec, typing.get_type_hints(ModelPrice))} |"
              for spec in dataclasses.fields(ModelPrice)]
    lines += ["", "orchard's table:", "", "| model | input | cached_input | output |", "|---|---:|---:|---:|"]
    lines += [f"| `{m}` | {p.input:g} | {p.cached_input:g} | {p.output:g} |" for m, p in DEFAULT_PRICES.items()]
    return "\n".join(lines) + "\n"


def _note(spec: dataclasses.Field[Any], hints: dict[str, Any]) -> str:
    note = str(spec.metadata["help"])
    if allowed := choices(spec, hints[spec.name]):
        note += f" ({' | '.join(allowed)})"
    return note + (range_note(spec.metadata) if spec.metadata["maximum"] is not None else "")


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return spec.default


def _differs(section: Any, spec: dataclasses.Field[Any]) -> bool:
    """Whether leaving the key out would load another value (a default may hang on other keys: `network`)."""
    value = getattr(section, spec.name)
    return bool(getattr(dataclasses.replace(section, **{spec.name: _default(spec)}), spec.name) != value)


def write(config: Config, path: Path) -> None:
    """Write the configuration; the text is re-validated so a written file always loads."""
    text = render(config)
    from_dict(parse_toml(text.encode(), path, "configuration"), source=str(path))
    Path(path).write_text(text, encoding="utf-8")
