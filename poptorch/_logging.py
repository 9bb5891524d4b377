"""Logging and the compilation progress bar (spec 4.11.1, 11.1 logDir / maxRepeatLogs /
showCompilationProgressBar, 11.2 setLogLevel).

PopTorch logs through the standard `logging` module under the "poptorch" logger (the
passes under "poptorch.passes"), printed on stdout by one handler of ours. Levels are
PopTorch's: TRACE_ALL and TRACE (below DEBUG), DEBUG, INFO (the default), WARN, ERR
and OFF (also PopTorch's DEBUG_IR, and its integers 0 TRACE to 4 ERR and 6 OFF);
`POPTORCH_LOG_LEVEL` sets the level when poptorch starts and `setLogLevel` changes it
later. What each level adds:

- INFO: compilation start and end with its wall time;
- DEBUG: the time of every compilation step, the cycle count of every run with
  `Options.logCycleCount(True)`;
- TRACE: the pipeline step by step as it runs;
- TRACE_ALL: the IR after every step.

`Options.maxRepeatLogs(n)` stops a line repeated word for word (the same message at the
same level, such as the cycle count of every run) after n lines, saying so once; None
shows all. The counts restart when a model compiles.
`Options.logDir(path)` also writes the log to `<path>/poptorch.log` and puts the
reproducers of failed compilation steps there. The logger does not propagate to the
root logger, so an application's own logging setup does not print our lines twice.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from typing import Any

from tqdm import tqdm

from poptorch.errors import Error

TRACE_ALL = 1
TRACE = 5
OFF = logging.CRITICAL + 10
# PopTorch's level names -> logging levels
LEVELS = {"TRACE_ALL": TRACE_ALL, "TRACE": TRACE, "DEBUG": logging.DEBUG,
          "INFO": logging.INFO, "WARN": logging.WARNING, "ERR": logging.ERROR, "OFF": OFF}
for _name, _level in LEVELS.items():
    logging.addLevelName(_level, _name)
# PopTorch also takes DEBUG_IR (an internal level, DEBUG for its Python side), and its
# legacy integer levels (there is no 5)
ALIASES = {"DEBUG_IR": "DEBUG"}
INT_LEVELS = {0: "TRACE", 1: "DEBUG", 2: "INFO", 3: "WARN", 4: "ERR", 6: "OFF"}
_INT_TEXT = ", ".join(f"{number} ({name})" for number, name in INT_LEVELS.items())

logger = logging.getLogger("poptorch")


class RepeatFilter(logging.Filter):
    """Let a message (its text and level) through at most `limit` times, then say once
    that its repeats are suppressed; `limit` None lets everything through. `configure`
    restarts the counts (each compilation)."""

    def __init__(self, limit: int | None = 4) -> None:
        super().__init__()
        self.limit = limit
        self.counts: dict[tuple[int, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if self.limit is None:
            return True
        message = record.getMessage()
        key = (record.levelno, message)
        seen = self.counts[key] = self.counts.get(key, 0) + 1
        if seen == self.limit + 1:
            record.msg, record.args = (f"{message} (repeated {self.limit} times; further "
                                       "repeats suppressed, see Options.maxRepeatLogs)"), None
            return True
        return seen <= self.limit


_repeats = RepeatFilter()
_console = logging.StreamHandler(sys.stdout)
_console.setFormatter(logging.Formatter("[%(asctime)s.%(msecs)03d] [poptorch] "
                                        "[%(levelname)s] %(message)s", "%H:%M:%S"))
_console.addFilter(_repeats)
_file_handler: logging.FileHandler | None = None


class _Stdout:
    """Write to the current sys.stdout (pytest and users may replace it)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


_console.setStream(_Stdout())
logger.addHandler(_console)
logger.propagate = False


def level_of(level: str | int, where: str) -> int:
    """The logging level of a PopTorch level: a name (any case; DEBUG_IR is DEBUG) or one
    of PopTorch's legacy integers (0 TRACE, 1 DEBUG, 2 INFO, 3 WARN, 4 ERR, 6 OFF)."""
    if isinstance(level, str):
        name = ALIASES.get(level.upper(), level.upper())
        if name in LEVELS:
            return LEVELS[name]
    elif isinstance(level, int) and not isinstance(level, bool):
        if level in INT_LEVELS:
            return LEVELS[INT_LEVELS[level]]
        shown = str(level) if level.bit_length() <= 64 else "(an int too large)"
        raise Error(f"{where}: unknown log level {shown}; the integer levels are PopTorch's: "
                    f"{_INT_TEXT}; or use a name: {', '.join(LEVELS)}", type="options")
    if isinstance(level, str):
        shown = repr(level) if len(level) <= 40 else f"{level[:40]!r}..."
    else:
        shown = repr(level) if level is None or isinstance(level, bool | float) else (
            f"of type {type(level).__name__}")
    raise Error(f"{where}: unknown log level {shown}; use one of "
                f"{', '.join(LEVELS)}", type="options")


def setLogLevel(level: str | int) -> None:  # noqa: N802 - PopTorch's name
    """Print messages of `level` and above: TRACE_ALL, TRACE, DEBUG, INFO, WARN, ERR or
    OFF, or PopTorch's legacy integers 0 (TRACE), 1 (DEBUG), 2 (INFO), 3 (WARN), 4 (ERR)
    and 6 (OFF). Any other level is an Error."""
    logger.setLevel(level_of(level, "setLogLevel"))


def configure(options: Any) -> None:
    """Apply a model's logging options: maxRepeatLogs and logDir (the latest compiled
    model's win, as the logger is shared)."""
    global _file_handler
    _repeats.limit = options.max_repeat_logs
    _repeats.counts.clear()
    wanted = (None if options.log_dir is None
              else os.path.abspath(os.path.join(options.log_dir, "poptorch.log")))
    if _file_handler is not None and _file_handler.baseFilename != wanted:
        logger.removeHandler(_file_handler)
        _file_handler.close()
        _file_handler = None
    if wanted and _file_handler is None:
        os.makedirs(options.log_dir, exist_ok=True)
        _file_handler = logging.FileHandler(wanted, encoding="utf-8")
        _file_handler.setFormatter(_console.formatter)
        _file_handler.addFilter(_repeats)
        logger.addHandler(_file_handler)


class CompileProgress:
    """The "Graph compilation" progress bar over capture, import and every pipeline step.

    Shown when `show` and stdout is a terminal (tqdm on stdout); otherwise silent. Each
    `step(name)` advances the bar by one and names the step that starts next."""

    def __init__(self, show: bool, total: int) -> None:
        stream = sys.stdout
        enabled = show and hasattr(stream, "isatty") and stream.isatty()
        # a pseudo-terminal may report a size of 0 x 0, where tqdm would draw nothing
        size = shutil.get_terminal_size()
        self.bar = tqdm(total=total, desc="Graph compilation", file=stream, unit="step",
                        disable=not enabled, leave=True, ncols=min(size.columns or 80, 120),
                        nrows=size.lines or 24)

    def start(self, name: str) -> None:
        """The step `name` begins."""
        self.bar.set_postfix_str(name, refresh=False)
        logger.log(TRACE, "compiling: %s", name)

    def done(self) -> None:
        """The current step ended."""
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


_env_level = os.environ.get("POPTORCH_LOG_LEVEL")
logger.setLevel(level_of(_env_level, "POPTORCH_LOG_LEVEL") if _env_level else logging.INFO)
