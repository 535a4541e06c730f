"""Configuration, one module per section of `sessiongate.toml`, validated at start-up.
`Settings` and `load_settings` are re-exported here. May import only `core` (pure rules
a section checks against), `errors` and `durations`; nothing here does I/O beyond
reading the file."""

from sessiongate.config.settings import (
    CONFIG_ENV,
    Settings,
    cross_check,
    format_validation_error,
    load_settings,
)

__all__ = [
    "CONFIG_ENV",
    "Settings",
    "cross_check",
    "format_validation_error",
    "load_settings",
]
