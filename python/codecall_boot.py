"""codecall boot: prepares the process, then runs the model's script as __main__.

Started as `python -S -c "import codecall_boot; codecall_boot.main()" script.py` (imported rather than run as
a file, so its compiled form is cached). It marks the tool channel close-on-exec (the script's own
subprocesses must not inherit it), applies the run's resource limits, runs the script, and reports an uncaught
exception over the channel so the host gets its exact type and message.

`main_pooled()` shares that preparation for a warm-pool interpreter: it waits for its script over the channel
(`$run`, see the protocol document), then runs it exactly like `main()`. Sessions start in `codecall_session`, which
prepares the process with this module's public functions.

This module also holds the wire vocabulary (below) for the runtime and the session: every interpreter imports it
first, so they read these names from here at no import cost, where a module of their own would add an import to
every run.
"""
import sys

# `posix` and `_thread` are built in; `os` would cost a millisecond of imports that a script printing one line never
# needs.
import _thread
import posix

# The wire vocabulary, as the host defines it in src/rpc/protocol.ts (same names) and src/core/launch-layout.ts
# (`BootVariable`); the protocol parity test compares the two.


class BootVariable:
    """Environment variables through which the host tells the boot and the runtime their settings."""

    CHANNEL_FILE_DESCRIPTOR = "CODECALL_CHANNEL_FD"
    MAX_FRAME_BYTES = "CODECALL_MAX_FRAME_BYTES"
    OUTPUT_NONCE = "CODECALL_OUTPUT_NONCE"
    RESOURCE_LIMITS = "CODECALL_RLIMITS"
    PARENT_PID = "CODECALL_PARENT_PID"
    WORK_DIRECTORY = "CODECALL_WORK_DIR"
    ARTIFACTS_DIRECTORY = "CODECALL_ARTIFACTS_DIR"
    WORKSPACE = "CODECALL_WORKSPACE"


class ChannelErrorCode:
    """Error codes of the tool channel (JSON-RPC 2.0 where it has one; see the protocol document)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    UNKNOWN_TOOL = -32601
    INVALID_ARGUMENTS = -32602
    TOOL_FAILED = -32000
    TOOL_CALL_LIMIT = -32001
    TOOL_CALL_TIMEOUT = -32002
    FRAME_TOO_LARGE = -32003
    RUN_ENDED = -32004


# Notifications start with this (a tool name never does).
NOTIFICATION_PREFIX = "$"
# Script → host: the script's uncaught exception.
EXCEPTION_NOTIFICATION = "$exception"
# Script → host: the script has finished; the interpreter exits with `exitCode` right after.
DONE_NOTIFICATION = "$done"
# Script → host: a warm-pool interpreter is prepared and waits for its script.
READY_NOTIFICATION = "$ready"
# Host → script: the script a warm-pool interpreter runs.
RUN_NOTIFICATION = "$run"
# Host → script: one cell of a session.
CELL_NOTIFICATION = "$cell"
# Script → host: a session cell finished.
CELL_DONE_NOTIFICATION = "$cell_done"
# Script → host: one chunk of an artifact (`name`, `offset`, base64 `data`, `final`, optional `mimeType`).
ARTIFACT_NOTIFICATION = "$artifact"
# Field of a reply whose long strings follow its frame as raw UTF-8: `[[key, bytes], ...]` (key None: the result).
RAW_TEXT_FIELD = "rawText"
# The output end marker is the prefix, the nonce, the suffix.
OUTPUT_END_MARKER_PREFIX = "\0codecall-end-"
OUTPUT_END_MARKER_SUFFIX = "\0"
# Largest frame when the host does not say (its default `maxFrameBytes`).
DEFAULT_MAX_FRAME_BYTES = 16 << 20

_RLIMIT_NAMES = {
    "as": "RLIMIT_AS",
    "nproc": "RLIMIT_NPROC",
    "fsize": "RLIMIT_FSIZE",
    "nofile": "RLIMIT_NOFILE",
    "cpu": "RLIMIT_CPU",
    "core": "RLIMIT_CORE",
}


def _environment(name, default=""):
    value = posix.environ.get(name.encode())
    return default if value is None else value.decode("utf-8", "surrogateescape")


def _channel_descriptor():
    return int(_environment(BootVariable.CHANNEL_FILE_DESCRIPTOR, "-1"))


# The end marker's nonce of a cold or pooled run, taken out of the environment before the script runs.
_output_nonce = None


def _take_output_nonce():
    global _output_nonce
    name = BootVariable.OUTPUT_NONCE.encode()
    value = posix.environ.pop(name, None)
    if value is not None:
        # Not the script's business, nor its subprocesses'.
        posix.unsetenv(name)
        _output_nonce = value.decode("ascii", "replace")


def output_end_marker(nonce):
    """The bytes that end a script's or a cell's output on stdout and stderr (the host's `outputEndMarker`)."""
    return (OUTPUT_END_MARKER_PREFIX + nonce + OUTPUT_END_MARKER_SUFFIX).encode()


def _write_all(descriptor, data):
    # One write may take only part of the data (a pipe or a socket with little room).
    while data:
        data = data[posix.write(descriptor, data):]


def write_marker(descriptor, marker):
    """Writes an end marker straight to the descriptor; says whether it could (the script may have closed it)."""
    try:
        _write_all(descriptor, marker)
        return True
    except OSError:
        return False


_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def libc_function(name):
    """A C function of the process (libc) returning an int, called through `_ctypes` without the `ctypes` package
    (whose imports cost milliseconds). Raises when `_ctypes` or the function is missing."""
    import _ctypes

    class _Int(_ctypes._SimpleCData):
        _type_ = "i"

    class _Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = _Int

    class _Process:
        _handle = _ctypes.dlopen(None, 0)

    return _Function((name, _Process))


def tie_to_host():
    """Isolation `none` on a host that is not root: dies with the host, as a sandbox dies with its pid namespace (a
    root host has no need: its watchdog kills everything of a run's own uid).

    The host names itself in CODECALL_PARENT_PID. The kernel sends SIGKILL when the parent goes (PR_SET_PDEATHSIG,
    through `_ctypes` without the `ctypes` package, which would cost milliseconds of imports); a parent other than the
    host means it died before that, and the process ends at once.
    """
    name = BootVariable.PARENT_PID.encode()
    value = posix.environ.pop(name, None)
    if value is None:
        return
    posix.unsetenv(name)
    try:
        libc_function("prctl")(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    except Exception:
        pass
    if posix.getppid() != int(value):
        posix._exit(1)


def enter_work_directory():
    """Isolation `none` through a mount namespace: `nsenter` leaves the process at the namespace's root, and a
    directory opened before it entered would have no path inside, so the run directory comes as CODECALL_WORK_DIR."""
    name = BootVariable.WORK_DIRECTORY.encode()
    value = posix.environ.pop(name, None)
    if value is not None:
        posix.unsetenv(name)
        posix.chdir(value)


def prepare_channel():
    """Takes the output nonce out of the environment and marks the channel close-on-exec (the script's subprocesses
    must not inherit it)."""
    _take_output_nonce()
    descriptor = _channel_descriptor()
    if descriptor >= 0:
        try:
            posix.set_inheritable(descriptor, False)
        except OSError:
            pass
    # Whatever else the host let slip through (descriptors it opened without close-on-exec) is not the script's.
    posix.closerange(max(descriptor, 2) + 1, 65536)


def set_resource_limit(resource, constant, soft, hard=None):
    """Sets a resource limit (`hard` defaults to the current hard limit), never above the current hard limit, which
    only a privileged process could raise; says whether the kernel took it."""
    _, current_hard = resource.getrlimit(constant)
    if hard is None:
        hard = current_hard
    if current_hard != resource.RLIM_INFINITY:
        soft = min(soft, current_hard)
        hard = min(hard, current_hard)
    try:
        resource.setrlimit(constant, (soft, hard))
        return True
    except (ValueError, OSError):
        return False


def apply_limits(skip=()):
    """Applies the run's resource limits (the host's `CODECALL_RLIMITS`), except those named in `skip`."""
    specification = _environment(BootVariable.RESOURCE_LIMITS)
    if not specification:
        return
    import resource

    for item in specification.split(","):
        name, _, value = item.partition("=")
        constant = getattr(resource, _RLIMIT_NAMES.get(name, ""), None)
        if constant is None or not value or name in skip:
            continue
        soft = int(value)
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later, so the host can tell a CPU kill apart.
        set_resource_limit(resource, constant, soft, soft + 1 if name == "cpu" else soft)


def _internal_prefixes():
    # The runtime's folder and the generated modules before it on PYTHONPATH: their frames are codecall's, not the
    # script's, and only cost the model tokens.
    import os

    runtime_dir = os.path.dirname(os.path.abspath(__file__))
    prefixes = [runtime_dir + os.sep]
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or os.path.abspath(entry) == runtime_dir:
            break
        prefixes.append(os.path.abspath(entry) + os.sep)
    return tuple(prefixes)


def _hide_internal_frames(report, prefixes, seen):
    import traceback

    if report is None or id(report) in seen:
        return
    seen.add(id(report))
    frames = [frame for frame in report.stack if not frame.filename.startswith(prefixes)]
    if len(frames) != len(report.stack):
        report.stack = traceback.StackSummary.from_list(frames)
    _hide_internal_frames(report.__cause__, prefixes, seen)
    _hide_internal_frames(report.__context__, prefixes, seen)


def describe_exception(error, traceback_object):
    """Writes the traceback (script frames only) to stderr; returns the `$exception` parameters."""
    import traceback

    report = traceback.TracebackException(type(error), error, traceback_object)
    _hide_internal_frames(report, _internal_prefixes(), set())
    text = "".join(report.format())
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:
        pass
    if isinstance(error, SyntaxError):
        message = "%s (line %s)" % (error.msg, error.lineno)
    else:
        message = str(error)
    return {"type": type(error).__name__, "message": message, "traceback": text}


def _report(error, traceback_object):
    params = describe_exception(error, traceback_object)
    runtime = sys.modules.get("codecall_runtime")
    if runtime is not None:
        # Through the runtime's channel, whose lock keeps a thread's frame whole.
        runtime.send_notification(EXCEPTION_NOTIFICATION, params)
    else:
        descriptor = _channel_descriptor()
        if descriptor < 0:
            return
        import json

        frame = (json.dumps({"method": EXCEPTION_NOTIFICATION, "params": params}) + "\n").encode()
        try:
            _write_all(descriptor, frame)
        except OSError:
            pass


class _Helper:
    """`help()` as `site` would install it: scripts run without `site` (it costs startup time), so it is added here."""

    def __repr__(self):
        return "Type help(object) for help about object."

    def __call__(self, *args, **kwargs):
        import pydoc

        return pydoc.help(*args, **kwargs)


class _Quitter:
    """`exit()` and `quit()` as `site` would install them."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use %s() to exit" % self.name

    def __call__(self, code=None):
        raise SystemExit(code)


def install_builtins():
    """Adds `help`, `exit` and `quit`, which `site` would have installed."""
    builtins = sys.modules["builtins"]
    if not hasattr(builtins, "help"):
        builtins.help = _Helper()
    for name in ("exit", "quit"):
        if not hasattr(builtins, name):
            setattr(builtins, name, _Quitter(name))


# The script's stdout is buffered like a bare interpreter's writing to a pipe (one write per 64 KiB, not one per
# print) and flushed at most this long after a print by a thread of the boot, so live output stays live and output
# printed before a kill (timeout, memory, a limit) has left the process. It is flushed at once before a tool call, a
# fork, a subprocess or an exec, at `os._exit`, and at the end of a run or cell.
_OUTPUT_BUFFER_BYTES = 1 << 16
_OUTPUT_FLUSH_SECONDS = 0.01
# Audit events after which another process writes to the same stdout (or this one is replaced): flush first, so the
# output keeps its order.
_SPAWN_EVENTS = frozenset(("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.forkpty"))
# Audit events after which the working directory may be another one: `os.chdir` (also raised by `os.fchdir`), and
# those of `_ctypes` reaching native code, which may call chdir(2) itself (a session also looks at every cell once the
# `ctypes` package is imported, see `codecall_session`).
_DIRECTORY_EVENTS = frozenset(
    ("os.chdir", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.cdata")
)
_exit = posix._exit


class _Output:
    """The buffered stdout the boot gives the script, and the lock held while it is flushed and across a fork."""

    stream = None
    buffer = None
    # The buffer's raw writer (see _stdout_writer).
    raw = None
    lock = None
    stopped = False
    flusher_started = False
    # Audit events seen that may have changed the working directory (see directory_changes).
    directory_events = 0
    # Held while a started flusher waits for the script (warm pool).
    gate = None


# Blocks up to this size are taken from the heap, whose free top is kept up to twice this size (see keep_freed_heap).
_HEAP_BLOCK_BYTES = 2 << 20


def keep_freed_heap():
    """Makes glibc's malloc keep freed memory for the next blocks instead of handing it back to the kernel at once
    (called once, by each way the boot starts an interpreter, before the script runs).

    By default it gives the top of its heap back as soon as 128 KiB of it are free, and maps every block over 128 KiB
    by itself: the text of a 100 KB file or reply, decoded and then dropped by the script, took fresh pages each time,
    each a page fault (tens of µs on a VM), often more time than reading it. Freeing a block that malloc mapped by
    itself raises both thresholds (mallopt(3): the mapping threshold to the block's size, the trimming one to twice
    that); the block is never written, so this costs a mapping and its removal. Another allocator ignores it.
    """
    try:
        bytes(_HEAP_BLOCK_BYTES)
    except MemoryError:
        # A memory limit too small for the block: malloc keeps its defaults, the script runs as it would.
        pass


def buffer_output():
    """Replaces the unbuffered stdout (PYTHONUNBUFFERED, which stderr and the script's Python subprocesses keep) with
    a buffered one, flushed as `_OUTPUT_FLUSH_SECONDS` says once `start_output_flusher` has run."""
    original = sys.stdout
    if original is None or _Output.stream is not None:
        return
    import io

    try:
        posix.fstat(1)
    except OSError:
        return
    raw = _stdout_writer(io)
    buffer = io.BufferedWriter(raw, _OUTPUT_BUFFER_BYTES)
    # Written through to the byte buffer at once: text and `sys.stdout.buffer.write` keep their order.
    stream = io.TextIOWrapper(buffer, encoding=original.encoding, errors=original.errors, newline="\n",
                              write_through=True)
    stream.mode = "w"
    _Output.stream = stream
    _Output.buffer = buffer
    _Output.raw = raw
    _Output.lock = _thread.allocate_lock()
    sys.stdout = sys.__stdout__ = stream
    posix.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                           after_in_child=_after_fork_in_child)
    sys.addaudithook(_on_audit_event)
    _exit_after_flushing.__name__ = _exit_after_flushing.__qualname__ = "_exit"
    posix._exit = _exit_after_flushing


def _stdout_writer(io):
    """Descriptor 1 as the raw writer of the buffered stdout: `io.FileIO(1, "wb", closefd=False)` named `<stdout>`.

    An exact FileIO, not a subclass: the buffer and the text layer above it then check whether they are closed in C,
    where a subclass sends each print through two attribute look-ups (a third of the cost of printing a short line).
    Its `write`, an attribute of the instance, is a C callable, FileIO's own, or while `take_buffered_output` runs the
    `write` of a BytesIO: no Python code runs between a write and the buffer learning what it wrote, so an exception a
    signal handler raises (an interrupt) can never make the buffer keep, and write again, what has left."""
    raw = io.FileIO(1, "wb", closefd=False)
    raw.name = "<stdout>"
    raw.write = raw.descriptor_write = raw.write
    return raw


def start_output_flusher(paused=False):
    """Starts the thread that flushes stdout within `_OUTPUT_FLUSH_SECONDS` of a print. `paused` (a warm-pool
    interpreter waiting for its script) starts it now, waiting without waking up until the next call starts it."""
    if _Output.stream is None:
        return
    if not _Output.flusher_started:
        _Output.flusher_started = True
        if paused:
            _Output.gate = _thread.allocate_lock()
            _Output.gate.acquire()
        _thread.start_new_thread(_flush_periodically, (_Output.gate,))
    elif not paused and _Output.gate is not None:
        gate = _Output.gate
        _Output.gate = None
        gate.release()


def flush_output():
    """Writes out what the script printed that is still buffered (errors are the script's to meet on its next print);
    says whether the output is still open."""
    lock = _Output.lock
    if lock is None:
        return False
    with lock:
        if _Output.stopped:
            return False
        try:
            _Output.buffer.flush()
        except Exception:
            pass
    return True


def output_stream():
    """The buffered stdout the boot gave the script (None when it kept the interpreter's)."""
    return _Output.stream


def take_buffered_output(keep, stop=False):
    """Flushes the buffered stdout into memory instead of descriptor 1, then calls `keep(data)` with the bytes
    (empty when nothing was buffered) while no flush can write: `keep` writes out what it does not keep itself, so
    the output keeps its order. `stop` then ends the output (see `stop_output`). Says False (and calls nothing) when
    the output is stopped or was never buffered."""
    lock = _Output.lock
    if lock is None:
        return False
    with lock:
        if _Output.stopped:
            return False
        raw = _Output.raw
        import io

        taken = io.BytesIO()
        raw.write = taken.write
        try:
            try:
                _Output.buffer.flush()
            except Exception:
                pass
            raw.write = raw.descriptor_write
            keep(taken.getvalue())
        finally:
            raw.write = raw.descriptor_write
            if stop:
                _Output.stopped = True
    return True


# What the host has not read yet of what this process wrote to descriptor 1 or 2 (Linux): SIOCOUTQ for a socket (a
# socketpair is what the host gives as stdout and stderr; its bytes count until the reader has taken them), FIONREAD
# for a pipe (the bytes it holds, asked through either end).
_UNREAD_BYTES_REQUESTS = {0o140000: 0x5411, 0o010000: 0x541B}
_FILE_TYPE_MASK = 0o170000
# The count either request gives (a C int), and that count when it is zero.
_UNREAD_COUNT_BYTES = 4
_NOTHING_UNREAD = bytes(_UNREAD_COUNT_BYTES)
# Most the end frame (`$cell_done`, `$done`) carries of what the script printed last; beyond it, the pipe carries it.
_CARRIED_OUTPUT_BYTES = 1 << 16
# Bytes a frame needs beside the carried output, which JSON may make up to six times longer (`\u00XX`).
_END_FRAME_BYTES = 512
_JSON_ESCAPE_FACTOR = 6
# Bytes that stand for themselves in a JSON string, or as a two-character escape (newline, tab, quote, backslash).
_PLAIN_TEXT_BYTES = bytes(range(0x20, 0x7F)) + b"\n\t"


class _Pipes:
    """The output pipes to the host as the process started: per descriptor 1 and 2, (device, inode, the `ioctl`
    request that tells what the host has not read yet), or None (not known: the output always ends with a marker)."""

    streams = (None, None)
    ioctl = None


def remember_pipes():
    """Notes which pipes descriptors 1 and 2 are, before the script can move them (imports `fcntl`: a session or a
    warm-pool interpreter pays it before its code comes; a cold run does without)."""
    if sys.platform != "linux":
        return
    try:
        from fcntl import ioctl
    except ImportError:
        return
    streams = []
    for descriptor in (1, 2):
        try:
            status = posix.fstat(descriptor)
        except OSError:
            streams.append(None)
            continue
        request = _UNREAD_BYTES_REQUESTS.get(status.st_mode & _FILE_TYPE_MASK)
        streams.append(None if request is None else (status.st_dev, status.st_ino, request))
    _Pipes.streams = tuple(streams)
    _Pipes.ioctl = ioctl


def pipe_read_out(descriptor):
    """Whether `descriptor` (1 or 2) is still the pipe to the host noted by `remember_pipes`, and the host has read
    everything written to it: whatever the script wrote there has then reached the host before a frame sent now can
    (the host reads its pipes and the channel on one thread, each read handled before the next)."""
    stream = _Pipes.streams[descriptor - 1]
    if stream is None:
        return False
    try:
        status = posix.fstat(descriptor)
        if (status.st_dev, status.st_ino) != stream[:2]:
            return False
        # A mutable buffer, which the call fills in place: given bytes, `ioctl` first fails to take them as writable,
        # and raising and dropping that error costs more than the system call.
        unread = bytearray(_UNREAD_COUNT_BYTES)
        _Pipes.ioctl(descriptor, stream[2], unread)
        return unread == _NOTHING_UNREAD
    except (OSError, ValueError):
        return False


def json_string(data):
    """`data` (bytes) as a JSON string literal, or None when it is not UTF-8; without the `json` module loaded (it costs
    a millisecond to import), only for plain ASCII text."""
    json = sys.modules.get("json")
    try:
        if json is not None:
            return json.dumps(bytes(data).decode("utf-8"))
        if data.translate(None, _PLAIN_TEXT_BYTES):
            return None
        text = bytes(data).decode("ascii")
    except Exception:
        return None
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def end_output(marker, frame_bytes, encode, stop):
    """Ends the output of a run or cell; returns (what the end frame carries of stdout, or None; whether the end marker
    went on stdout; on stderr; whether writing out what stdout held failed).

    The host takes a stream as complete at its marker, or at the end frame when no marker was written. A marker is
    written only where the host may not have read everything yet: where it has read the pipe out, what stdout's
    buffer still holds goes in the end frame (`encode(data)`, None when it cannot), so a script or cell that printed
    little ends in one frame. Elsewhere the buffered tail and the marker go out in one write. `stop` ends the boot's
    stdout for good (see `stop_output`)."""
    result = [None, False, False, False]

    def keep(data):
        if (
            marker is not None
            and len(data) <= _CARRIED_OUTPUT_BYTES
            and _JSON_ESCAPE_FACTOR * len(data) + _END_FRAME_BYTES <= frame_bytes
            and pipe_read_out(1)
        ):
            carried = encode(data) if data else ""
            if carried is not None:
                result[0] = carried or None
                return
        written = len(data)
        if marker is not None:
            data += marker
        if data:
            wrote = write_marker(1, data)
            result[1] = wrote and marker is not None
            result[3] = not wrote and written > 0

    if not take_buffered_output(keep, stop):
        keep(b"")
    if marker is not None and not pipe_read_out(2):
        result[2] = write_marker(2, marker)
    return tuple(result)


def stop_output():
    """The end: flushes stdout a last time; nothing is written to it by the boot's flushing after this."""
    flush_output()
    lock = _Output.lock
    if lock is not None:
        with lock:
            _Output.stopped = True


def _flush_periodically(gate):
    if gate is not None:
        gate.acquire()
    # A lock never released: acquiring it with a timeout is a sleep that needs no `time` import.
    sleeper = _thread.allocate_lock()
    sleeper.acquire()
    while True:
        sleeper.acquire(timeout=_OUTPUT_FLUSH_SECONDS)
        if not flush_output():
            return


def _before_fork():
    # The child must not inherit buffered output (it would be written twice), nor the lock held by the flusher.
    lock = _Output.lock
    lock.acquire()
    try:
        _Output.buffer.flush()
    except Exception:
        pass


def _after_fork_in_parent():
    _Output.lock.release()


def _after_fork_in_child():
    # The flusher thread did not survive the fork: a child flushes each line instead (one thread per forked child
    # would count against the process limit).
    _Output.lock = _thread.allocate_lock()
    try:
        _Output.stream.reconfigure(line_buffering=True)
    except Exception:
        pass


def _on_audit_event(event, arguments):
    if event in _SPAWN_EVENTS:
        flush_output()
    elif event in _DIRECTORY_EVENTS:
        _Output.directory_events += 1
    elif event == "import" and _ScriptLines.pending is not None and arguments[0] == "linecache":
        _ScriptLines.fill()


def directory_changes():
    """How many times the working directory may have been changed so far (an `os.chdir`, native code reached through
    `_ctypes`), as the boot's audit hook counts them, each before the change is made; None without the hook (no
    buffered stdout)."""
    return None if _Output.stream is None else _Output.directory_events


def _exit_after_flushing(status):
    flush_output()
    _exit(status)


def _run(path, source=None):
    if source is None:
        with open(path, "rb") as handle:
            source = handle.read()
    module = type(sys)("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    try:
        code = compile(source, path, "exec")
    except SyntaxError as error:
        _report(error, None)
        return 1
    import gc

    # What exists now (interpreter, boot, runtime) lives until the end: the collector need not walk it again, neither
    # during the script nor at its exit (see _finish).
    gc.freeze()
    try:
        exec(code, module.__dict__)
    except SystemExit as error:
        return exit_status(error)
    except BaseException as error:
        # Skip this file's own frame: the model should see its script, not the boot.
        _report(error, error.__traceback__.tb_next if error.__traceback__ else None)
        return 1
    return 0


def enter_workspace():
    """Makes the workspace the working directory when the host mounted it (`CODECALL_WORKSPACE`); returns it, or None.

    Relative paths then start in the workspace, and its modules import (it becomes the script's folder on sys.path).
    """
    workspace = posix.environ.get(BootVariable.WORKSPACE.encode())
    if not workspace:
        return None
    try:
        posix.chdir(workspace)
    except OSError as error:
        sys.stderr.write("codecall: cannot enter the workspace: %s\n" % error)
        return None
    return posix.getcwd()


class _ScriptLines:
    """The script's lines for tracebacks, which read them by its relative name: from the workspace, that name no longer
    resolves (or names another file). They go in `linecache`'s cache, where no later check drops them; when the
    module is not loaded yet, only once something imports it (a traceback, a warning), seen by the boot's audit hook:
    `linecache` brings `tokenize`, `re` and `enum` along, several milliseconds of imports most runs never need."""

    # (path, source) waiting for `linecache` to be imported.
    pending = None

    @staticmethod
    def remember(path, source):
        _ScriptLines.pending = (path, source)
        # Without the boot's stdout there is no audit hook to wait for the import with.
        if "linecache" in sys.modules or _Output.stream is None:
            _ScriptLines.fill()

    @staticmethod
    def fill():
        """Puts the pending lines in `linecache`'s cache, importing it (from the audit hook, before the script's own
        import of it, which then finds it loaded)."""
        pending = _ScriptLines.pending
        _ScriptLines.pending = None
        if pending is None:
            return
        path, source = pending
        try:
            import linecache

            lines = source.decode("utf-8", "replace").splitlines(True)
            linecache.cache[path] = (len(source), None, lines, path)
        except Exception:
            # An import the script runs must not fail for the sake of a traceback's lines.
            pass


def _run_main(path, source=None):
    global _images_since
    sys.argv = sys.argv[1:]
    if source is None:
        # Read before leaving the run directory for the workspace: the script file stays where the host wrote it.
        try:
            with open(path, "rb") as handle:
                source = handle.read()
        except OSError:
            source = None
    folder = posix.getcwd() if "/" not in path else path.rsplit("/", 1)[0]
    # Dated here, by its relative name, while the working directory is still the run directory that holds it.
    _images_since = _modified_at(path)
    workspace = enter_workspace()
    if workspace is not None and source is not None:
        _ScriptLines.remember(path, source)
    # The script's folder first on sys.path, as when Python runs a file: the workspace when it is mounted.
    sys.path[0] = workspace or folder
    start_output_flusher()
    _finish(_run(path, source))


def _finish(status):
    """Ends the process as the interpreter's own exit would, as far as a script can tell, and sooner.

    Like Py_FinalizeEx: non-daemon threads are joined, atexit callbacks run, the standard streams are flushed, and
    __main__'s namespace is cleared and garbage collected, so the script's own objects are finalized (an open file
    is flushed and closed). Then the process ends without tearing down every module and type one by one, which takes
    milliseconds that no script can observe (what it skips: finalizers of objects other modules hold, and C stdio
    buffers, which the standard library does not use). Before it ends, it ends its stdout and stderr with the run's
    end marker, closes them and tells the host its exit status (`$done`), so the host need not wait for the kernel to
    tear the process (or its sandbox) down; then it yields the CPU to the host for that teardown (`yield_to_host`).
    """
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    # Before atexit: matplotlib closes every figure there.
    send_figures()
    import atexit

    atexit._run_exitfuncs()
    main = sys.modules.get("__main__")
    if main is not None:
        namespace = main.__dict__
        for name in list(namespace):
            if name != "__builtins__":
                namespace[name] = None
    import gc

    gc.collect()
    send_artifacts(_images_since)
    stdout = sys.stdout
    if stdout is not _Output.stream or stdout is None:
        try:
            stdout.flush()
        except Exception:
            # As the interpreter does when it cannot flush stdout at exit.
            if status == 0:
                status = 120
    elif stdout.closed and status == 0:
        status = 120
    try:
        sys.stderr.flush()
    except Exception:
        pass
    # The host takes the output as complete at the markers, or at `$done` where none was needed, without waiting for
    # the pipes to close (under a sandbox, they close only when the sandbox is torn down). The boot's stdout ends here,
    # also when the script replaced sys.stdout.
    marker = output_end_marker(_output_nonce) if _output_nonce else None
    try:
        frame_bytes = int(_environment(BootVariable.MAX_FRAME_BYTES, str(DEFAULT_MAX_FRAME_BYTES)))
    except ValueError:
        frame_bytes = DEFAULT_MAX_FRAME_BYTES
    output, stdout_marked, stderr_marked, failed = end_output(marker, frame_bytes, json_string, stop=True)
    if failed and status == 0:
        status = 120
    # What the parent sees of exit(status).
    status &= 0xFF
    _send_done(status, output, stdout_marked, stderr_marked)
    yield_to_host()
    for descriptor in (1, 2):
        try:
            posix.close(descriptor)
        except OSError:
            pass
    _exit(status)


# Images a script saves in its working directory are sent as artifacts too (as a notebook would show them).
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".webp")
# When the script's file was written (nanoseconds, on the file clock): images in the working directory at least as
# new are the script's, and are sent as artifacts. None: nothing is looked at.
_images_since = None


def _modified_at(path):
    if path is None:
        return None
    try:
        return posix.stat(path).st_mtime_ns
    except OSError:
        return None


def send_figures():
    """Sends every matplotlib figure still open as a PNG artifact (see `codecall_runtime.send_open_figures`)."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    try:
        import codecall_runtime

        codecall_runtime.send_open_figures()
    except BaseException:
        pass


def artifacts_directory():
    """The folder whose files are sent as artifacts (`CODECALL_ARTIFACTS_DIR`; empty when the host set none)."""
    return _environment(BootVariable.ARTIFACTS_DIRECTORY)


def send_artifacts(since):
    """Sends what the run or cell left to return (see `codecall_runtime.send_pending_artifacts`): the files of the
    artifacts directory, open matplotlib figures, images saved in the working directory since `since` (nanoseconds,
    or None). The runtime is imported only when there is something to send: a script that saved nothing pays one
    listing of two folders. Says whether there was something to send."""
    try:
        directory = artifacts_directory()
        pending = "matplotlib.pyplot" in sys.modules
        if not pending and directory:
            try:
                pending = len(posix.listdir(directory)) > 0
            except OSError:
                pass
        if not pending and since is not None:
            pending = _has_image_since(since)
        if not pending:
            return False
        import codecall_runtime

        codecall_runtime.send_pending_artifacts(directory, since)
    except BaseException:
        # Nothing the script left may keep the run from ending.
        pass
    return True


def _has_image_since(since):
    try:
        names = posix.listdir(".")
    except OSError:
        return False
    for name in names:
        if name.lower().endswith(_IMAGE_SUFFIXES):
            try:
                if posix.stat(name, follow_symlinks=False).st_mtime_ns >= since:
                    return True
            except OSError:
                pass
    return False


# The niceness of what is left of a run once it told the host its end: the interpreter's teardown (the kernel frees
# tens of MB, milliseconds of CPU) then waits while the host, woken by `$done`, builds the result on the same CPU.
_ENDED_RUN_NICENESS = 10


def yield_to_host():
    """Lowers the priority of the ended run's process group (every thread of the interpreter, whichever of them frees
    its memory last, and what the script left in the group, which the host kills now) to `_ENDED_RUN_NICENESS`; only
    the interpreter's own thread when it does not lead its group (the group may then be the host's). A process may
    always lower its own priority; one that is lower already stays as it is."""
    try:
        niceness = max(_ENDED_RUN_NICENESS, posix.getpriority(posix.PRIO_PROCESS, 0))
        if posix.getpgid(0) == posix.getpid():
            posix.setpriority(posix.PRIO_PGRP, 0, niceness)
        else:
            posix.setpriority(posix.PRIO_PROCESS, 0, niceness)
    except (OSError, AttributeError):
        pass


def _send_done(status, output, stdout_marked, stderr_marked):
    descriptor = _channel_descriptor()
    if descriptor < 0:
        return
    runtime = sys.modules.get("codecall_runtime")
    # A thread of the script may be writing a frame: wait for it (briefly), never cut a frame in two.
    if runtime is not None and not runtime.stop_writes(0.5):
        return
    frame = ('{"method":"%s","params":{"exitCode":%d,"stdout":%s,"stderr":%s%s}}\n' % (
        DONE_NOTIFICATION,
        status,
        "true" if stdout_marked else "false",
        "true" if stderr_marked else "false",
        "" if output is None else ',"output":' + output,
    )).encode()
    try:
        _write_all(descriptor, frame)
    except OSError:
        pass


def _script_path():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -c 'import codecall_boot; codecall_boot.main()' SCRIPT\n")
        sys.exit(2)
    return sys.argv[1]


def main():
    """Prepares the process and runs the script named by the first argument; exits with its status."""
    enter_work_directory()
    tie_to_host()
    prepare_channel()
    apply_limits()
    install_builtins()
    keep_freed_heap()
    buffer_output()
    _run_main(_script_path())


# Imported by a warm-pool interpreter before it says `$ready` (see `main_pooled`).
_PRELOADED_MODULES = ("asyncio", "json", "re")


def main_pooled():
    """A warm-pool interpreter: prepares the process like `main()`, says `$ready`, waits for `$run`, then writes
    the script it carries to the path named by the first argument and runs it exactly like `main()`."""
    enter_work_directory()
    tie_to_host()
    prepare_channel()
    apply_limits()
    install_builtins()
    keep_freed_heap()
    buffer_output()
    start_output_flusher(paused=True)
    path = _script_path()
    import codecall_runtime

    channel = codecall_runtime.get_channel()
    # Paid here, before the script is handed over, what every run pays on its way: the first compile() builds the
    # AST types (about 2 ms) and the first real one runs the compiler's paths cold, the first decoded frame warms its
    # path up, the first import of `gc` and `atexit` goes through the import system, and the script's file is
    # created (the script cannot see it before it runs).
    compile(b"", path, "exec")
    exec(compile(b"import sys\nvalue = [len(sys.argv), {'key': 'text'}]\n", path, "exec"), {})
    channel.decode(('{"method":"%s","params":{"code":""}}' % RUN_NOTIFICATION).encode())
    import atexit
    import gc

    # The standard modules scripts import most, imported while nothing waits for this interpreter: `asyncio` alone
    # costs tens of milliseconds (it is what `tools.aio` and a gather of calls need); `json` and `re` a few each.
    for name in _PRELOADED_MODULES:
        try:
            __import__(name)
        except Exception:
            pass
    remember_pipes()
    descriptor = posix.open(path, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o600)
    channel.notify(READY_NOTIFICATION, {})
    while True:
        message = channel.next_notification()
        if message is None:
            # The host closed the pool: nothing ran, nothing to clean up.
            _exit(0)
        if message.get("method") == RUN_NOTIFICATION:
            break
    params = message.get("params")
    code = params.get("code") if type(params) is dict else None
    if type(code) is not str:
        code = ""
    source = code.encode("utf-8", "surrogatepass")
    try:
        _write_all(descriptor, source)
    finally:
        posix.close(descriptor)
    _run_main(path, source)


def exit_status(error):
    """The exit status `SystemExit` asks for, as the interpreter computes it (a message goes to stderr, status 1)."""
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:
        pass
    return 1
