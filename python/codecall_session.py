"""codecall session: one interpreter that runs cells sent over the channel, in one namespace, until the host goes away.

Started as `python -S -c "import codecall_session; codecall_session.main()"`, prepared like a run by codecall_boot.
Kept apart from codecall_boot so that a cold run, which never needs this code, does not load it.
"""
import sys

import posix
from time import time_ns

import codecall_boot as _boot
from codecall_boot import CELL_DONE_NOTIFICATION, CELL_NOTIFICATION


class _Session:
    """State of a session interpreter: the cell running now, whether an interrupt may hit it, the CPU limit set."""

    cell = 0
    running = False
    cpu_limit = None


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
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + 1 + int(seconds)
    if _Session.cpu_limit != soft and _boot.set_resource_limit(resource, resource.RLIMIT_CPU, soft):
        _Session.cpu_limit = soft


def _flush_streams():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # The boot's stdout, also when the cell replaced sys.stdout.
    _boot.flush_output()


_FILE_CLOCK_SLACK_NANOSECONDS = 20_000_000


def _send_cell_artifacts(started):
    # An interrupt landing while the files go out ends the sending, never the session.
    try:
        _boot.send_artifacts(started)
    except KeyboardInterrupt:
        pass


def _run_cell(namespace, params):
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
    _flush_streams()
    wrote_stdout = _boot.write_marker(1, end)
    wrote_stderr = _boot.write_marker(2, end)
    return {"id": cell, "exitCode": status, "exception": exception, "stdout": wrote_stdout, "stderr": wrote_stderr}


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
    _boot.buffer_output()
    _boot.start_output_flusher()
    interrupts = _take_interrupt_pipe()
    import _thread

    import codecall_runtime

    channel = codecall_runtime.get_channel()
    module = type(sys)("__main__")
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    sys.argv = [""]
    sys.path[0] = _boot.enter_workspace() or posix.getcwd()
    _signal.signal(_signal.SIGINT, _on_interrupt)
    _thread.start_new_thread(_watch_interrupts, (interrupts, _thread.get_ident()))
    namespace = module.__dict__
    while True:
        try:
            message = channel.next_notification()
            if message is None:
                break
            if message.get("method") != CELL_NOTIFICATION or type(message.get("params")) is not dict:
                continue
            done = _run_cell(namespace, message["params"])
            if done is not None:
                channel.notify(CELL_DONE_NOTIFICATION, done)
        except KeyboardInterrupt:
            continue
    _flush_streams()
    _boot.stop_output()
    posix._exit(0)
