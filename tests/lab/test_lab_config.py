"""orchard.toml: loaded whole, every problem named, the default file readable and loadable."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.lab.config import orchard_toml as config
from orchard.lab.config import rendered as config_file
from orchard.lab.config.orchard_toml import Config, ConfigError
from orchard.lab.config.sections import ExecutorKind, TargetConfig


def test_rendered_default_loads_back_to_the_same_configuration(tmp_path: Path) -> None:
    original = Config(target=TargetConfig(repo="/some/repo", build="make {binary}"))
    path = tmp_path / "orchard.toml"
    config_file.write(original, path)
    text = path.read_text()
    assert "# the target repository" in text and "[launcher]" in text  # commented for a reader
    loaded = config.load(path)
    assert config.to_dict(loaded) == config.to_dict(original)
    assert loaded.path == path.resolve()


def test_the_written_file_is_short_names_each_key_once_and_keeps_what_differs(tmp_path: Path) -> None:
    """What `orchard init` writes: the keys a lab must set, then only what differs from a default; each other
    key named once under its section (no second `test =` or `name =` for a search-and-replace to hit)."""
    path = tmp_path / "orchard.toml"
    written = config.from_dict({"target": {"repo": "/r"}, "stop": {"top_attempted": 3},
                                "launchers": {"shell": {"name": "command", "template": "true"}}})
    config_file.write(written, path)
    text = path.read_text()
    keys = [line.split(" = ", 1)[0] for line in text.splitlines() if " = " in line and not line.startswith("#")]
    assert sorted(keys) == sorted(["repo", "build", "test", "binary", "suite", "name", "top_attempted", "name",
                                   "template"])  # the second `name` is [launchers.shell]'s
    assert len(text.splitlines()) < 72, text  # the old file, every key with its help: ~190 lines
    for name, cls in config.SECTIONS.items():
        for spec in dataclasses.fields(cls):  # every key is there: set, or named under its section
            assert re.search(rf"^{spec.name} = |^# also: .*\b{spec.name}\b", text, re.M | re.S), (name, spec.name)
    assert config.to_dict(config.load(path)) == config.to_dict(written)
    # claude's network is its default, patch's is not claude's: a file that changes the launcher keeps meaning it
    assert "network" not in dict(tomllib.loads(text)["launcher"])
    patch = config.from_dict({"target": {"repo": "/r"}, "launcher": {"name": "patch", "network": "api",
                                                                      "base_url": "http://127.0.0.1:1"}})
    assert 'network = "api"' in config_file.render(patch)


def test_docs_configuration_md_is_every_key_as_the_schema_says() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert docs.read_text() == config_file.reference(), "regenerate: orchard.lab.config.rendered.reference()"
    for cls in config.SECTIONS.values():
        assert all(f"| `{spec.name}` |" in docs.read_text() for spec in dataclasses.fields(cls))


def test_every_bad_key_and_value_is_named_in_one_message(tmp_path: Path) -> None:
    path = tmp_path / "orchard.toml"
    path.write_text(
        """
[target]
repo = "/r"
vcs = "svn"
timout = 3
build = "make {bin}"

[workers]
count = "three"
timeout_minutes = -1

[launcher]
name = "gpt"
args = [1, 2]

[colours]
x = 1
"""
    )
    with pytest.raises(ConfigError) as raised:
        config.load(path)
    message = str(raised.value)
    for expected in (
        "target.vcs: 'svn' is not one of git, oak",
        "target.timout: unknown key",
        "target.build: unknown placeholder {bin}",
        "workers.count: expected an integer, got 'three'",
        "workers.timeout_minutes: -1.0 is below the minimum",
        "launcher.name: 'gpt' is not one of",
        "launcher.args: expected a list of strings",
        "[colours]: unknown section",
    ):
        assert expected in message
    assert message.startswith(f"{path}: 8 problems")


def test_lanes_must_add_up_and_the_command_launcher_needs_a_template() -> None:
    with pytest.raises(ConfigError) as raised:
        config.from_dict({"target": {"repo": "r"}, "workers": {"count": 4, "exploit": 1, "explore": 1},
                          "launcher": {"name": "command"}})
    assert "exploit + explore lanes (1 + 1) must equal count (4)" in str(raised.value)
    assert "launcher.template: the command launcher needs a template" in str(raised.value)


def test_missing_target_and_broken_toml_and_missing_file_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="target.repo: missing"):
        config.from_dict({})
    broken = tmp_path / "broken.toml"
    broken.write_text("[target\nrepo = ")
    with pytest.raises(UsageError, match=r"configuration .*broken.toml: invalid TOML: .*line 1"):
        config.load(broken)
    with pytest.raises(UsageError, match="configuration file not found: .*absent.toml"):
        config.load(tmp_path / "absent.toml")


def test_integers_are_accepted_where_numbers_are_expected() -> None:
    loaded = config.from_dict({"target": {"repo": "r"}, "workers": {"timeout_minutes": 5}})
    assert loaded.workers.timeout_minutes == 5.0 and isinstance(loaded.workers.timeout_minutes, float)


def test_literal_braces_in_commands_are_written_doubled() -> None:
    loaded = config.from_dict({"target": {"repo": "r", "build": "awk '{{print $1}}' {binary}"}})
    assert loaded.target.build.startswith("awk")
    with pytest.raises(ConfigError, match="literal braces"):
        config.from_dict({"target": {"repo": "r", "build": "awk '{print $1'"}})


def test_the_written_file_is_plain_toml_with_every_section(tmp_path: Path) -> None:
    path = tmp_path / "orchard.toml"
    config_file.write(Config(target=TargetConfig(repo="r")), path)
    assert set(tomllib.loads(path.read_text())) == set(config.SECTIONS)


def test_sandbox_keys_network_defaults_by_launcher_and_pass_env_names_variables() -> None:
    loaded = config.from_dict({"target": {"repo": "/r"}, "launcher": {"name": "command", "template": "true"},
                               "launchers": {"agent": {"name": "codex"}, "online": {"name": "patch", "network": True}}})
    assert loaded.workers.sandbox == "bwrap"
    assert loaded.launcher.network == "none"  # patch and command workers are offline unless they say otherwise
    assert loaded.launchers["agent"].network == "api"  # codex: its model endpoint only
    assert loaded.launchers["online"].network == "all"  # the older `true`
    with pytest.raises(ConfigError) as raised:
        config.from_dict({"target": {"repo": "/r"}, "workers": {"sandbox": "docker"},
                          "launcher": {"pass_env": ["GOOD_*", "BAD NAME"]}, "lab": {"pass_env": ["$HOME"]}})
    message = str(raised.value)
    assert "workers.sandbox: 'docker' is not one of bwrap, none" in message
    assert "launcher.pass_env: 'BAD NAME' is not a variable name" in message
    assert "lab.pass_env: '$HOME' is not a variable name" in message


def test_the_executor_is_read_as_its_vocabulary_and_written_as_before(tmp_path: Path) -> None:
    loaded = config.from_dict({"target": {"repo": "/r"}, "workers": {"executor": "dask"}})
    assert loaded.workers.executor is ExecutorKind.DASK
    path = tmp_path / "orchard.toml"
    config_file.write(loaded, path)
    text = path.read_text()
    assert 'executor = "dask"' in text and "(auto | tmux | subprocess | dask)" in text
    assert config.load(path).workers.executor is ExecutorKind.DASK
    with pytest.raises(ConfigError, match="workers.executor: 'docker' is not one of auto, tmux, subprocess, dask"):
        config.from_dict({"target": {"repo": "/r"}, "workers": {"executor": "docker"}})
