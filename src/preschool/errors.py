"""Exceptions users see. Each names the file, line or config field at fault."""


class PreschoolError(Exception):
    """Base class: an error whose message is meant for the user, not a traceback."""


class ConfigError(PreschoolError, ValueError):
    """A config value is wrong. ``field`` is the dotted path, e.g. ``arms[1].stages[0].tokens``."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)

    def __reduce__(self):  # rebuilt from its fields, not its message: errors cross worker processes pickled
        return type(self), (self.field, self.message)


class DataError(PreschoolError):
    """Input or stored data is unreadable, corrupt or inconsistent (names the file)."""


NO_ROOM_FIX = "free space (or use another --out) and rerun the same command"


class TrainingError(PreschoolError):
    """Training cannot go on (a non-finite loss the ``nonfinite`` policy does not get past); names the
    stage, step and batch, and the checkpoint that stays the last good one."""


class OutputError(PreschoolError, OSError):
    """An output could not be written (disk full, quota, read-only disk or folder). ``path`` is the
    final path of what was being written; atomic writes leave whatever was there before untouched.
    ``fix`` says what the user does about it (free space, or make the place writable)."""

    def __init__(self, path: str, reason: str, fix: str = NO_ROOM_FIX):
        self.path = str(path)
        self.reason = reason
        self.fix = fix
        PreschoolError.__init__(self, f"{path}: cannot write ({reason}); nothing already written was changed: {fix}")

    def __reduce__(self):  # as ConfigError's: a worker's full disk reaches the parent as this error
        return type(self), (self.path, self.reason, self.fix)

    def __str__(self) -> str:
        return str(self.args[0])


class StdoutError(PreschoolError):
    """Standard output could not be written (a full disk behind ``> file``, ``/dev/full``)."""


class StdoutClosed(StdoutError):
    """Whoever read standard output stopped reading (``| head -1``): the command ends quietly."""


class MissingDependency(PreschoolError, ImportError):
    """An optional dependency is missing; the message says how to install it."""

    def __init__(self, package: str, extra: str | None = None, purpose: str = ""):
        self._fields = (package, extra, purpose)
        cmd = f"pip install 'preschool[{extra}]'" if extra else f"pip install {package}"
        what = f" for {purpose}" if purpose else ""
        super().__init__(f"{package} is needed{what}; install it with: {cmd}")

    def __reduce__(self):  # as ConfigError's
        return type(self), self._fields
