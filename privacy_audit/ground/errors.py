"""Errors a user can fix. The CLI prints them as one line and exits with code 2."""


class AuditError(Exception):
    """A problem with the user's input: config, data, model directory or scores.

    The message must be one sentence that names the problem and, where there is a
    finite set of allowed values, lists them.
    """


class ConfigError(AuditError):
    """The TOML config is malformed or names an unknown key or value."""


class DataError(AuditError):
    """Input data is missing, empty, one-class, malformed or contains NaN."""
