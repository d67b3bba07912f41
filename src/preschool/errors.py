"""Exceptions users see. Each names the file, line or config field at fault."""


class PreschoolError(Exception):
    """Base class: an error whose message is meant for the user, not a traceback."""


class ConfigError(PreschoolError, ValueError):
    """A config value is wrong. ``field`` is the dotted path, e.g. ``arms[1].stages[0].tokens``."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class DataError(PreschoolError):
    """Input or stored data is unreadable, corrupt or inconsistent (names the file)."""


class MissingDependency(PreschoolError, ImportError):
    """An optional dependency is missing; the message says how to install it."""

    def __init__(self, package: str, extra: str | None = None, purpose: str = ""):
        cmd = f"pip install 'preschool[{extra}]'" if extra else f"pip install {package}"
        what = f" for {purpose}" if purpose else ""
        super().__init__(f"{package} is needed{what}; install it with: {cmd}")
