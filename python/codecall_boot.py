"""codecall boot: prepares the process, then runs the model's script as __main__.

Started as `python -S -c "import codecall_boot; codecall_boot.main()" script.py` (imported rather than run as
a file, so its compiled form is cached). It marks the tool channel close-on-exec (the script's own
subprocesses must not inherit it), applies the run's resource limits, runs the script, and reports an uncaught
exception over the channel so the host gets its exact type and message.
"""
import sys

# `posix` is built in; `os` would cost a millisecond of imports that a script printing one line never needs.
import posix

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
    return int(_environment("CODECALL_CHANNEL_FD", "-1"))


def _prepare_channel():
    descriptor = _channel_descriptor()
    if descriptor >= 0:
        try:
            posix.set_inheritable(descriptor, False)
        except OSError:
            pass
    # Whatever else the host let slip through (descriptors it opened without close-on-exec) is not the script's.
    posix.closerange(max(descriptor, 2) + 1, 65536)


def _apply_limits():
    specification = _environment("CODECALL_RLIMITS")
    if not specification:
        return
    import resource

    for item in specification.split(","):
        name, _, value = item.partition("=")
        constant = getattr(resource, _RLIMIT_NAMES.get(name, ""), None)
        if constant is None or not value:
            continue
        soft = int(value)
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later, so the host can tell a CPU kill apart.
        hard = soft + 1 if name == "cpu" else soft
        _, current_hard = resource.getrlimit(constant)
        if current_hard != resource.RLIM_INFINITY:
            soft = min(soft, current_hard)
            hard = min(hard, current_hard)
        try:
            resource.setrlimit(constant, (soft, hard))
        except (ValueError, OSError):
            pass


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


def _report(error, traceback_object):
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
    runtime = sys.modules.get("codecall_runtime")
    params = {"type": type(error).__name__, "message": message, "traceback": text}
    if runtime is not None:
        runtime._notify("$exception", params)
    else:
        descriptor = _channel_descriptor()
        if descriptor < 0:
            return
        import json

        frame = (json.dumps({"method": "$exception", "params": params}) + "\n").encode()
        try:
            while frame:
                frame = frame[posix.write(descriptor, frame):]
        except OSError:
            pass


def _run(path):
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
    try:
        exec(code, module.__dict__)
    except SystemExit:
        raise
    except BaseException as error:
        # Skip this file's own frame: the model should see its script, not the boot.
        _report(error, error.__traceback__.tb_next if error.__traceback__ else None)
        return 1
    return 0


def main():
    """Prepares the process and runs the script named by the first argument; exits with its status."""
    _prepare_channel()
    _apply_limits()
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -c 'import codecall_boot; codecall_boot.main()' SCRIPT\n")
        sys.exit(2)
    path = sys.argv[1]
    sys.argv = sys.argv[1:]
    # The script's folder first on sys.path, as when Python runs a file (the run directory is the cwd).
    sys.path[0] = posix.getcwd() if "/" not in path else path.rsplit("/", 1)[0]
    status = _run(path)
    try:
        sys.stdout.flush()
    except Exception:
        pass
    sys.exit(status)
