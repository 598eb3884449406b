"""Exit codes of every ``embody`` command (README, "Exit codes").

A command returns one of these, or raises an error that names its own code in a class attribute
``exit_code`` (and optionally ``exit_label``, the word printed before the message); ``embody`` prints
``embody COMMAND: LABEL: message`` as one line and exits with that code. Codes 3–5 keep the meanings
they had when each area documented its own: 3 is "unsolvable" for ``plan`` and "simulator unreachable"
for ``drive``.
"""

OK = 0
FAILED = 1  # the command ran and its outcome is a failure (deploy ended outside POLICY; validate found problems)
INPUT = 2  # bad input: an argument, file, config or name (argparse's own errors exit 2 too)
UNSOLVABLE = 3  # plan: no plan exists / plan demo: the goal was not reached
UNREACHABLE = 3  # drive --sim carla: the simulator server cannot be reached
TIMEOUT = 4  # plan: the planner ran out of time
NO_PLANNER = 5  # plan: the planner is not available
INTERRUPTED = 130  # Ctrl-C (the shell's 128 + SIGINT); train saves its checkpoint first


class CommandError(Exception):
    """Bad input found by a command itself: printed as one line, exit code 2."""

    exit_code = INPUT


def exit_code_of(error: BaseException) -> int | None:
    """The exit code an error stands for, or None for a bug (which keeps its traceback)."""
    code = getattr(error, "exit_code", None)
    if code is not None:
        return code
    if isinstance(error, OSError):  # a missing or unreadable file the user named
        return INPUT
    return None


def describe(error: BaseException) -> str:
    """``label: message`` for one line (an OSError as ``path: reason``)."""
    label = getattr(error, "exit_label", "error")
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"{label}: {error.filename}: {error.strerror}"
    return f"{label}: {error}"
