"""codecall session: one interpreter that runs cells sent over the channel, in one namespace, until the host goes away.

Started as `python -S -c "import codecall_session; codecall_session.main()"`, prepared like a run by codecall_boot.
Kept apart from codecall_boot so that a cold run, which never needs this code, does not load it.
"""
import sys

import posix
from time import monotonic, time_ns

import codecall_boot as _boot
from codecall_boot import CELL_DONE_NOTIFICATION, CELL_NOTIFICATION


# Assumed when the interpreter cannot tell how many processors the machine has.
_UNKNOWN_PROCESSORS = 1024


class _Session:
    """State of a session interpreter: the cell running now, whether an interrupt may hit it, the CPU limit set."""

    cell = 0
    running = False
    cpu_limit = None
    # When the CPU time was last read (monotonic seconds), what it was, and for how many seconds a cell the limit is.
    cpu_read_at = None
    cpu_used = 0.0
    cpu_seconds = None
    # Processors of the machine (whatever affinity the script sets): CPU time grows at most this many times as fast as
    # the clock.
    processors = 1


def _on_interrupt(signal_number, frame):
    # Only a running cell is interrupted; a late request (the cell ended meanwhile) must not hit the boot itself.
    if _Session.running:
        raise KeyboardInterrupt


def _watch_interrupts(descriptor, main_thread):
    import _signal

    pending = b""
    while True:
        try:
            chunk = posix.read(descriptor, 256)
        except OSError:
            return
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            if line.isdigit() and int(line) == _Session.cell and _Session.running:
                _signal.pthread_kill(main_thread, _signal.SIGINT)


def _take_interrupt_pipe():
    # The host writes interrupt requests (a cell id per line) to stdin; the script gets /dev/null as stdin instead.
    descriptor = posix.dup(0)
    null = posix.open("/dev/null", posix.O_RDONLY)
    try:
        posix.dup2(null, 0)
    finally:
        posix.close(null)
    return descriptor


def _cell_cpu_limit(seconds):
    # RLIMIT_CPU counts the whole life of the process: each cell gets `seconds` more than what was used so far
    # (whole seconds, so most cells find the limit already where it belongs and skip the call).
    now = monotonic()
    read_at = _Session.cpu_read_at
    if (
        read_at is not None
        and seconds == _Session.cpu_seconds
        and _Session.cpu_used + (now - read_at) * _Session.processors < int(_Session.cpu_used) + 1
    ):
        # Too little time has passed for the whole seconds used to have grown: the limit is where it belongs.
        return
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = int(used) + 1 + int(seconds)
    if _Session.cpu_limit != soft and _boot.set_resource_limit(resource, resource.RLIMIT_CPU, soft):
        _Session.cpu_limit = soft
    if _Session.cpu_limit == soft:
        _Session.cpu_read_at = now
        _Session.cpu_used = used
        _Session.cpu_seconds = seconds


def _flush_streams():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # The boot's stdout, also when the cell replaced sys.stdout.
    _boot.flush_output()


def _end_output(end, frame_bytes):
    """Ends the cell's output (see `codecall_boot.end_output`): returns (the text the result frame carries or None,
    whether the end marker went on stdout, on stderr)."""
    boot_stream = _boot.output_stream()
    for stream in (sys.stdout, sys.stderr):
        # The script's own streams (the boot's is taken below): what they hold reaches descriptors 1 and 2 first.
        if stream is not boot_stream:
            try:
                stream.flush()
            except Exception:
                pass
    output, wrote_stdout, wrote_stderr, _ = _boot.end_output(end, frame_bytes, _utf8_text, stop=False)
    return output, wrote_stdout, wrote_stderr


def _utf8_text(data):
    # The channel encodes the frame: the output goes in as text.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


_FILE_CLOCK_SLACK_NANOSECONDS = 20_000_000


# inotify_init1 flags IN_NONBLOCK | IN_CLOEXEC.
_WATCH_FLAGS = 0o4000 | 0o2000000
# Every change that can leave a file to send: written (IN_MODIFY), new times (IN_ATTRIB), closed after writing
# (IN_CLOSE_WRITE), moved in (IN_MOVED_TO), created (IN_CREATE); and a watched folder itself deleted (IN_DELETE_SELF) or
# moved (IN_MOVE_SELF).
_WATCHED_CHANGES = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x400 | 0x800
# Events after which the watch no longer follows the paths listed (IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED: another
# folder may stand there now) or may have missed one (IN_Q_OVERFLOW counts as a change only).
_WATCH_LOST = 0x400 | 0x800 | 0x8000
# struct inotify_event: int wd, uint32 mask, uint32 cookie, uint32 len, then `len` bytes of name.
_EVENT_HEAD_BYTES = 16
_WATCH_READ_BYTES = 4096


class _FileWatch:
    """An inotify descriptor watching the artifacts folder and the working directory, so a cell that changed neither
    skips listing them (two listings cost tens of µs a cell). Without it (not Linux, no inotify, its limits reached,
    the descriptor closed by the script, the working directory moved) every cell lists them."""

    descriptor = -1
    # (device, inode) of the inotify descriptor and of the watched working directory.
    identity = None
    directory = None
    # The last look found something (a file the artifacts folder still holds is looked at again by the next cell).
    look_again = True
    # A poll object for the descriptor (None without the `select` module): most cells change nothing, and a poll says
    # so for less than the read that fails with EAGAIN (the exception costs as much as the system call).
    pending = None
    # The working directory is another folder than the watched one (as last looked at).
    elsewhere = False
    # The boot's count of possible directory changes (`codecall_boot.directory_changes`) at the last look at the working
    # directory, and the count up to which no look is needed (None: look at the next cell).
    directory_looked_at = None
    directory_settled = None


def _identity(status):
    return status.st_dev, status.st_ino


def _watch_files():
    if sys.platform != "linux":
        return
    try:
        descriptor = _boot.libc_function("inotify_init1")(_WATCH_FLAGS)
    except Exception:
        return
    if descriptor < 0:
        return
    try:
        add_watch = _boot.libc_function("inotify_add_watch")
        folders = [b"."]
        artifacts = _boot.artifacts_directory()
        if artifacts:
            folders.append(artifacts.encode("utf-8", "surrogateescape"))
        for folder in folders:
            if add_watch(descriptor, folder, _WATCHED_CHANGES) < 0:
                raise OSError("cannot watch %r" % folder)
        _FileWatch.identity = _identity(posix.fstat(descriptor))
        _FileWatch.directory = _identity(posix.stat("."))
    except Exception:
        posix.close(descriptor)
        return
    _FileWatch.descriptor = descriptor
    try:
        from select import POLLIN, poll

        pending = poll()
        pending.register(descriptor, POLLIN)
        _FileWatch.pending = pending
    except Exception:
        pass


def _files_may_have_changed():
    """Whether a file to send may have appeared since the last look: an inotify event came (they are all read now),
    the working directory is another one, or there is no watch."""
    descriptor = _FileWatch.descriptor
    if descriptor < 0:
        return True
    try:
        if _identity(posix.fstat(descriptor)) != _FileWatch.identity:
            # The script closed it (the number may name one of its files now): never read it again.
            _FileWatch.descriptor = -1
            return True
        changed = _FileWatch.look_again or _working_directory_moved()
        lost = False
        pending = _FileWatch.pending
        # Only after the identity check: the poll runs on the descriptor known to be the watch.
        while pending is None or pending.poll(0):
            try:
                events = posix.read(descriptor, _WATCH_READ_BYTES)
            except BlockingIOError:
                break
            if not events:
                break
            changed = True
            lost = lost or _watch_lost(events)
    except OSError:
        # Not closed: the number may be free now, and soon one of the script's files.
        _FileWatch.descriptor = -1
        return True
    if lost:
        _stop_watching()
    return changed


def _working_directory_moved():
    """Whether the working directory is another folder than the watched one. It is looked at (a `stat`) only after
    the boot's audit hook saw something that may have changed it; at every cell without the hook, or once the script
    imported `ctypes` (a foreign function looked up before calls chdir(2) without an audit event)."""
    count = _boot.directory_changes()
    if count is None or count != _FileWatch.directory_settled or "ctypes" in sys.modules:
        _FileWatch.elsewhere = _identity(posix.stat(".")) != _FileWatch.directory
        # Settled once a look finds the count where the look before it did: the audit event comes before the change is
        # made, which a thread of the script may be making while this looks.
        _FileWatch.directory_settled = count if count == _FileWatch.directory_looked_at else None
        _FileWatch.directory_looked_at = count
    return _FileWatch.elsewhere


def _watch_lost(events):
    position = 0
    while position + _EVENT_HEAD_BYTES <= len(events):
        mask = int.from_bytes(events[position + 4:position + 8], sys.byteorder)
        if mask & _WATCH_LOST:
            return True
        position += _EVENT_HEAD_BYTES + int.from_bytes(events[position + 12:position + 16], sys.byteorder)
    return False


def _stop_watching():
    descriptor = _FileWatch.descriptor
    _FileWatch.descriptor = -1
    try:
        posix.close(descriptor)
    except OSError:
        pass


def _send_cell_artifacts(started):
    # An interrupt landing while the files go out ends the sending, never the session.
    if not _files_may_have_changed():
        return
    found = True
    try:
        found = _boot.send_artifacts(started)
    except KeyboardInterrupt:
        pass
    _FileWatch.look_again = found


def _run_cell(namespace, params, frame_bytes):
    cell = params.get("id")
    code = params.get("code")
    nonce = params.get("nonce")
    if type(cell) is not int or type(code) is not str or type(nonce) is not str:
        return None
    cpu_seconds = params.get("cpuSeconds")
    if type(cpu_seconds) is int and cpu_seconds > 0:
        _cell_cpu_limit(cpu_seconds)
    # The host counts what the streams carry from the moment it sent the cell; the end markers close the cell.
    end = _boot.output_end_marker(nonce)
    filename = "<cell %d>" % cell
    status = 0
    exception = None
    # The file clock is coarse (it lags by up to a tick): images written as the cell starts count as the cell's.
    started = time_ns() - _FILE_CLOCK_SLACK_NANOSECONDS
    try:
        _Session.cell = cell
        try:
            compiled = compile(code, filename, "exec")
        except SyntaxError as error:
            status = 1
            exception = _boot.describe_exception(error, None)
        else:
            import linecache

            # Tracebacks (here and in later cells) show the cell's lines, as for a file.
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            _Session.running = True
            try:
                exec(compiled, namespace)
                _Session.running = False
            except SystemExit as error:
                _Session.running = False
                status = _boot.exit_status(error)
            except BaseException as error:
                _Session.running = False
                status = 1
                # Skip this file's own frame: the model should see its cell, not the boot.
                traceback_object = error.__traceback__.tb_next if error.__traceback__ else None
                exception = _boot.describe_exception(error, traceback_object)
    except KeyboardInterrupt as error:
        # The interrupt landed between the cell's end and the flag being cleared: it still ends this cell.
        _Session.running = False
        status = 1
        exception = {"type": "KeyboardInterrupt", "message": "", "traceback": ""}
    _send_cell_artifacts(started)
    output, wrote_stdout, wrote_stderr = _end_output(end, frame_bytes)
    done = {"id": cell, "exitCode": status, "exception": exception, "stdout": wrote_stdout, "stderr": wrote_stderr}
    if output is not None:
        done["output"] = output
    return done


# The `$cell_done` frame of a cell that raised nothing (most cells), written out from this template, the tail of its
# output (if the report carries one) as a JSON string: encoding the report as a message costs several times more.
_PLAIN_CELL_DONE_FRAME = (
    '{"method":"%s","params":{"id":%%d,"exitCode":%%d,"exception":null,"stdout":%%s,"stderr":%%s%%s}}\n'
    % CELL_DONE_NOTIFICATION
)


def _send_cell_done(channel, done, encode_string):
    if done["exception"] is not None:
        channel.notify(CELL_DONE_NOTIFICATION, done)
        return
    output = done.get("output")
    frame = _PLAIN_CELL_DONE_FRAME % (
        done["id"],
        done["exitCode"],
        "true" if done["stdout"] else "false",
        "true" if done["stderr"] else "false",
        "" if output is None else ',"output":' + encode_string(output),
    )
    channel.send_encoded(frame.encode("utf-8", "surrogatepass"))


def main():
    """A session interpreter: prepares the process like `codecall_boot.main()`, then runs each `$cell` sent over the
    channel in one `__main__` namespace (variables and imports persist; an exception ends the cell, not the session)
    and answers each with `$cell_done`. A line with the running cell's id on stdin interrupts it (KeyboardInterrupt).
    """
    import _signal

    _boot.enter_work_directory()
    _boot.tie_to_host()
    _boot.prepare_channel()
    # CPU time is limited per cell (see _cell_cpu_limit); the other limits hold for the whole session.
    _boot.apply_limits(skip=("cpu",))
    _boot.install_builtins()
    _boot.keep_freed_heap()
    _boot.buffer_output()
    _boot.start_output_flusher()
    interrupts = _take_interrupt_pipe()
    _boot.remember_pipes()
    import _thread

    import codecall_runtime

    channel = codecall_runtime.get_channel()
    module = type(sys)("__main__")
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    sys.argv = [""]
    sys.path[0] = _boot.enter_workspace() or posix.getcwd()
    _watch_files()
    _Session.processors = posix.cpu_count() or _UNKNOWN_PROCESSORS
    _signal.signal(_signal.SIGINT, _on_interrupt)
    _thread.start_new_thread(_watch_interrupts, (interrupts, _thread.get_ident()))
    namespace = module.__dict__
    frame_bytes = channel._max_frame_bytes
    # The channel's own encoder of JSON strings (the C one when there is one), keeping non-ASCII text as it is.
    encode_string = channel._encode_string
    while True:
        try:
            message = channel.next_notification()
            if message is None:
                break
            if message.get("method") != CELL_NOTIFICATION or type(message.get("params")) is not dict:
                continue
            done = _run_cell(namespace, message["params"], frame_bytes)
            if done is not None:
                _send_cell_done(channel, done, encode_string)
        except KeyboardInterrupt:
            continue
    _flush_streams()
    _boot.stop_output()
    posix._exit(0)
