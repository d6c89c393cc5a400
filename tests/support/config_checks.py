"""Checks on config loading that several test folders share."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import ConfigError, load_config


def assert_moved_key_refused(section: str, old: str, new: str, value: str, tmp_path: Path) -> None:
    """`section.old`, which moved to `section.new`, is refused naming the new key, in `--set` and in YAML alike.

    Args:
        section: The config section, e.g. `trainer`.
        old: The key's old name in the section, e.g. `learning_rate`.
        new: Its new name in the section, e.g. `schedule.learning_rate`.
        value: A value for the old key, as `--set` and YAML take it.
        tmp_path: Where the YAML file is written.
    """
    message = rf"`{section}.{old}` moved to `{section}.{new}`"
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"{section}.{old}={value}"])
    config_file = tmp_path / "old.yaml"
    config_file.write_text(f"{section}:\n  {old}: {value}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(config_file)
