"""Host-side profiling (spec 11.2 `poptorch.profiling.Channel`, 4.11.2) and the profiling
settings the executor reads.

`Channel(name)` records tracepoints: `with channel.tracepoint("Load"):` records one span
(channel, name, wall-clock start and end in ns, thread, nesting depth) when the block
exits, also on an exception; `channel.instrument(obj, "fwd", ...)` wraps methods so that
each call is a tracepoint named "<ClassName>.<method>". PopTorch sends these to libpvti,
the PopVision System Analyser's library, and becomes a no-op without it; here there is
no libpvti: tracepoints always go to the process-wide `_recorder` (one list append under
a lock, so it is cheap and thread-safe), and the profile report (`runtime/profile.py`)
draws them in its "Host" process. The recorder keeps every span until `clear()`.

Times are wall-clock nanoseconds (`time.time_ns()` at import plus the monotonic
`time.perf_counter_ns()` elapsed since, so spans nest exactly even if the clock is
adjusted).

Host tracing: with `PVTI_OPTIONS='{"enable":"true","directory":"..."}'` (the variable
PopTorch's libpvti reads), PopTorch's own host phases are tracepoints of the "poptorch"
channel (`host_phase`, `TracedProgress`), written with the device timeline in the
profile report. Off, a phase is one shared no-op context manager.

`profile_settings` decides whether a run writes a report and where: from
`Options.enableProfiling(dir)` and the `POPLAR_ENGINE_OPTIONS` environment variable
(Poplar's engine options as a JSON object, values as strings such as "true"), whose
values take precedence over `enableProfiling` (spec 11.1 enableProfiling).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import threading
import time
from collections.abc import Callable, Iterator

from poptorch._logging import CompileProgress
from poptorch.errors import Error

__all__ = ["Channel", "profile_settings"]


class _Recorder:
    """Every tracepoint span of the process, in the order they ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self._local = threading.local()  # .depth: open tracepoints of this thread
        self._wall_origin = time.time_ns()
        self._perf_origin = time.perf_counter_ns()

    def now(self) -> int:
        """Wall-clock time in ns, advancing monotonically."""
        return self._wall_origin + time.perf_counter_ns() - self._perf_origin

    @contextlib.contextmanager
    def span(self, channel: str, name: str) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        start = self.now()
        try:
            yield
        finally:
            end = self.now()
            self._local.depth = depth
            thread = threading.current_thread()
            event = {"channel": channel, "name": name, "start_ns": start, "end_ns": end,
                     "thread": thread.ident, "thread_name": thread.name, "depth": depth}
            with self._lock:
                self._events.append(event)

    def events(self) -> list[dict]:
        """Copies of the recorded spans."""
        with self._lock:
            return [dict(event) for event in self._events]

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


_recorder = _Recorder()


class Channel:
    """Profiling channel: a named source of host tracepoints (spec 11.2).

    >>> channel = poptorch.profiling.Channel("MyApp")
    >>> with channel.tracepoint("TimeThis"):
    ...     functionToTime()
    >>> channel.instrument(myobj, "methodName", "otherMethod")
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise Error(f"a profiling Channel needs a non-empty string name, got {name!r}",
                        type="profiling")
        self.name = name

    def tracepoint(self, name: str) -> contextlib.AbstractContextManager[None]:
        """A context manager recording the time spent in its block as `name`."""
        if not isinstance(name, str) or not name:
            raise Error(f"a tracepoint needs a non-empty string name, got {name!r}",
                        type="profiling")
        return _recorder.span(self.name, name)

    def instrument(self, obj: object, *methods: str) -> object:
        """Wrap the named methods of `obj` (an instance or a class) in tracepoints named
        "<ClassName>.<method>"; returns `obj`. Instrumenting a method twice on the same
        channel keeps one tracepoint."""
        if not methods:
            raise Error("instrument needs the names of one or more methods to wrap, "
                        "e.g. channel.instrument(model, \"forward\")", type="profiling")
        owner = obj.__name__ if isinstance(obj, type) else type(obj).__name__
        for method in methods:
            if not isinstance(method, str):
                raise Error(f"instrument takes method names as strings, got {method!r}",
                            type="profiling")
            if isinstance(obj, type):
                raw = inspect.getattr_static(obj, method, None)
                function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            else:
                raw = function = getattr(obj, method, None)
            if function is None or not callable(function):
                what = "does not exist" if raw is None else "is not a method"
                raise Error(f"{owner}.{method} {what}; instrument takes the names of "
                            f"{owner}'s methods", type="profiling")
            if getattr(function, "_poptorch_channel", None) == self.name:
                continue
            wrapped = self._wrap(function, f"{owner}.{method}")
            if isinstance(raw, (staticmethod, classmethod)):
                wrapped = type(raw)(wrapped)
            setattr(obj, method, wrapped)
        return obj

    def _wrap(self, function: Callable, name: str) -> Callable:
        @functools.wraps(function)
        def traced(*args, **kwargs):
            with _recorder.span(self.name, name):
                return function(*args, **kwargs)

        traced._poptorch_channel = self.name
        return traced


ENGINE_OPTIONS = "POPLAR_ENGINE_OPTIONS"


def _engine_flag(options: dict, key: str) -> bool | None:
    """A boolean engine option: Poplar takes the strings "true" / "false"."""
    if key not in options:
        return None
    value = options[key]
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise Error(f'{ENGINE_OPTIONS} sets "{key}" to {json.dumps(value)}; use "true" or '
                '"false"', type="options")


def _json_object(variable: str, what: str, example: str, short_example: str) -> dict:
    """The JSON object environment variable `variable` holds ({} when unset or empty);
    an error naming it, with an example, when it is not a JSON object."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise Error(f"{variable} is not valid JSON ({error.msg} at character "
                    f"{error.pos}): {text!r}; set it to a JSON object such as "
                    f"'{example}'", type="options") from None
    if not isinstance(options, dict):
        raise Error(f"{variable} must be {what}, got {text!r}; for example "
                    f"'{short_example}'", type="options")
    return options


def _engine_options() -> dict:
    example = '{"autoReport.all":"true"}'
    return _json_object(ENGINE_OPTIONS, "a JSON object of engine options", example, example)


def profile_settings(profile_dir: str | None, model_name: str | None,
                     default_name: str) -> tuple[str, str] | None:
    """Where the profile report of a run goes: (directory, report name), or None when
    profiling is off.

    `profile_dir` is `Options.enableProfiling`'s directory: None when it was not called,
    "" or "." for the current directory. `POPLAR_ENGINE_OPTIONS` takes precedence:
    "autoReport.outputExecutionProfile", else "autoReport.all", turns the report on or off,
    "autoReport.directory" chooses the directory (default: `profile_dir`, else the current
    directory, spec 4.11.2). Host tracing (`PVTI_OPTIONS`, `pvti_directory`) turns the
    report on too, in its directory when neither chooses one, so that the host phases
    are written with the device timeline. The report is named `model_name` (`Options.modelName`) or
    `default_name` ("inference" or "training"), spec 11.1 modelName.
    """
    options = _engine_options()
    enabled = _engine_flag(options, "autoReport.outputExecutionProfile")
    if enabled is None:
        enabled = _engine_flag(options, "autoReport.all")
    traced = pvti_directory()  # host tracing writes the trace there, with the device's
    if enabled is None:
        enabled = profile_dir is not None or traced is not None
    if not enabled:
        return None
    directory = options.get("autoReport.directory", profile_dir or traced)
    if directory is not None and not isinstance(directory, str):
        raise Error(f'{ENGINE_OPTIONS} sets "autoReport.directory" to '
                    f"{json.dumps(directory)}; use a path string", type="options")
    return directory or ".", model_name or default_name


# ---- PopTorch's own host phases as tracepoints (PVTI_OPTIONS) --------------------------
PVTI_OPTIONS = "PVTI_OPTIONS"
HOST_CHANNEL = "poptorch"  # the channel of PopTorch's own tracepoints (libpvti's)
_PVTI_KEYS = ("enable", "directory")
_OFF = contextlib.nullcontext()


def pvti_directory() -> str | None:
    """Where host tracing writes its trace, from `PVTI_OPTIONS` (libpvti's JSON object,
    as PopTorch documents it: '{"enable":"true","directory":"..."}'); None when it is
    unset or "enable" is not "true". The directory defaults to the current one."""
    options = _json_object(PVTI_OPTIONS, "a JSON object",
                           '{"enable":"true","directory":"traces"}', '{"enable":"true"}')
    if not options:
        return None
    unknown = sorted(set(options) - set(_PVTI_KEYS))
    if unknown:
        raise Error(f"{PVTI_OPTIONS} sets {', '.join(map(json.dumps, unknown))}, which host "
                    f"tracing does not know; its options are {', '.join(_PVTI_KEYS)}",
                    type="options")
    directory = options.get("directory", ".")
    if not isinstance(directory, str) or not directory:
        raise Error(f'{PVTI_OPTIONS} sets "directory" to {json.dumps(directory)}; use a '
                    "path string", type="options")
    enabled = options.get("enable", "false")
    if not (isinstance(enabled, bool) or str(enabled).lower() in ("true", "false")):
        raise Error(f'{PVTI_OPTIONS} sets "enable" to {json.dumps(enabled)}; use "true" or '
                    '"false"', type="options")
    return directory if str(enabled).lower() == "true" else None


_tracing = False  # PVTI_OPTIONS enabled tracing when last read (`read_host_tracing`)


def read_host_tracing() -> bool:
    """Read `PVTI_OPTIONS` again (at the start of each compilation and call)."""
    global _tracing
    _tracing = pvti_directory() is not None
    return _tracing


def host_phase(name: str) -> contextlib.AbstractContextManager[None]:
    """One of PopTorch's host phases (capture, each compile step, JIT, weight upload, a
    call, its input preparation, each program run, its output copy) as a tracepoint of
    the "poptorch" channel when `PVTI_OPTIONS` enabled tracing when last read; otherwise
    one shared no-op context (a flag test, nothing recorded)."""
    return _recorder.span(HOST_CHANNEL, name) if _tracing else _OFF


class TracedProgress(CompileProgress):
    """The compile progress bar whose steps (capture, import, each pipeline step, JIT,
    machine model) are also host phases, under one "compile" phase from its creation to
    `close`."""

    def __init__(self, show: bool, total: int) -> None:
        super().__init__(show, total)
        self.enabled = read_host_tracing()
        self.open: list[contextlib.AbstractContextManager[None]] = []
        self._enter("compile")

    def _enter(self, name: str) -> None:
        if self.enabled:
            phase = _recorder.span(HOST_CHANNEL, name)
            phase.__enter__()
            self.open.append(phase)

    def _exit(self, keep: int) -> None:
        while len(self.open) > keep:
            self.open.pop().__exit__(None, None, None)

    def start(self, name: str) -> None:
        super().start(name)
        self._exit(1)
        self._enter(name)

    def done(self) -> None:
        self._exit(1)
        super().done()

    def close(self) -> None:
        self._exit(0)
        super().close()
