"""codecall runtime: the script side of the tool channel, shipped with codecall (standard library only).

Generated tool modules call `call` / `acall`; scripts see `ToolError` and the helpers `json_parse`, `shell_quote`,
`retry` and `save_artifact` through the generated module. Calls are thread-safe and may run concurrently: every call carries an id
and replies are matched by id, whichever thread reads them. The boot and the session interpreter use `get_channel`,
`send_notification`, `stop_writes` and `send_pending_artifacts`.
"""
import _thread
import sys
import time

# `posix` is built in; `os` (and `json`, `threading`) would cost milliseconds of imports on every run that calls a
# tool, more than the calls themselves.
import posix

# The wire vocabulary lives in the boot, which every interpreter has imported already.
from codecall_boot import (
    ARTIFACT_NOTIFICATION,
    DEFAULT_MAX_FRAME_BYTES,
    NOTIFICATION_PREFIX,
    RAW_TEXT_FIELD,
    BootVariable,
    ChannelErrorCode,
    flush_output,
)
from codecall_boot import _IMAGE_SUFFIXES

__all__ = ["ToolError", "call", "acall", "json_parse", "shell_quote", "retry", "save_artifact", "search_catalog"]

# A lone caller polls the channel this long before it sleeps in a blocking read (yielding the processor between
# polls): a fast tool's reply then lands on a running thread instead of waking a sleeping one, which costs a
# scheduler wake-up (tens of µs on a VM). It polls only for a tool whose last reply came within this time: a slower
# one (a large file read) would be polled for in vain, a system call and an exception per poll, while the host needs
# the processor to answer; its next quick reply turns polling on again for that tool.
_REPLY_POLL_NANOSECONDS = 100_000
# A reader that has the start of a reply polls this long for the rest before it sleeps (see _Channel._read_at_least).
_REST_POLL_NANOSECONDS = 50_000
# After the reply to its last asynchronous call, the reader thread waits this long for the next call before it ends: a
# coroutine awaiting calls one after another would otherwise start a thread per call (hundreds of µs each on a VM).
_READER_LINGER_MILLISECONDS = 50
# Starting size of the channel's receive buffer: one read asks for what room it has.
_READ_BYTES = 1 << 16
# Largest receive buffer kept between reads. Replies are read into one buffer the channel keeps, so a large reply
# costs no fresh memory (on a VM, a new page can take tens of µs to fault in); one larger than this (with its raw text)
# grows the buffer for itself, which then drops back to _READ_BYTES.
_KEPT_BUFFER_BYTES = 2 << 20
_clock = time.perf_counter_ns
_yield_processor = getattr(posix, "sched_yield", lambda: None)


class ToolError(Exception):
    """A tool call failed: the tool raised, the arguments were invalid, or a limit was reached.

    `tool` is the tool's name, `code` the channel's error code (see the codecall protocol), and the message is the
    host's, never a host stack trace.
    """

    def __init__(self, message, tool=None, code=ChannelErrorCode.TOOL_FAILED):
        super().__init__(message)
        self.tool = tool
        self.code = code


class _PendingCall:
    """A call of a thread waiting for its reply: `reply` stays None until the reply (or the channel's failure)
    arrives. While its thread sleeps, `waiter` is the lock it sleeps on (see _Channel._wait_for_turn)."""

    __slots__ = ("reply", "waiter")

    def __init__(self):
        self.reply = None
        self.waiter = None

    def deliver(self, reply):
        self.reply = reply
        self.wake()

    def wake(self):
        """Wakes the call's thread if it sleeps. Called with the channel's lock held."""
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            waiter.release()


class _PendingAsyncCall:
    """A call of an asyncio task: the reply resolves `future` in the task's event loop."""

    __slots__ = ("loop", "future")

    def __init__(self, loop, future):
        self.loop = loop
        self.future = future

    def deliver(self, reply):
        if _running_loop() is self.loop:
            # Read by the loop's own reader (see _Channel._on_loop_readable): the future is settled in place.
            _resolve_future(self.future, reply)
            return
        try:
            self.loop.call_soon_threadsafe(_resolve_future, self.future, reply)
        except RuntimeError:
            # The loop is closed: nobody waits for this reply any more.
            pass


class _Channel:
    """One NDJSON channel over an inherited socket descriptor, shared by all threads of the script.

    Whichever thread is waiting reads the socket ("leader") and hands other threads their replies, so a lone
    sequential caller never switches threads. Asynchronous callers have their event loop watch the socket and read
    what comes (see _on_loop_readable), with no thread between the reply and the coroutine; where that cannot be (a
    thread reads already, calls of another loop, a loop without readers), a reader thread reads while they wait.
    """

    def __init__(self, descriptor, max_frame_bytes):
        self._descriptor = descriptor
        self._max_frame_bytes = max_frame_bytes
        self._encode_json, self._encode_string, self._decode_json = _json_codec()
        self._frame_heads = {}
        self._lock = _thread.allocate_lock()
        self._replied = _Condition(self._lock)
        self._write_lock = _thread.allocate_lock()
        self._pending = {}
        self._notifications = []
        self._next_id = 0
        self._reading = False
        self._waiting = 0
        # The calls whose threads sleep until their reply comes or they are to read the channel (see _wake_reader), in
        # the order they started to wait (a dict used as an ordered set).
        self._sleeping_calls = {}
        # The asynchronous calls waiting, counted by event loop (empty when none waits).
        self._async_loops = {}
        # The event loop that watches the channel for its coroutines' replies (see _on_loop_readable), or None.
        self._loop_reader = None
        # Whether the last call made was asynchronous: its reader thread then waits a while for the next one.
        self._async_recent = False
        # What was read and not yet handed out (the start of a frame, or of the next ones) is `_buffer[:_buffered]`.
        self._buffer = bytearray(_READ_BYTES)
        self._buffered = 0
        self._broken = None
        self._forked = False
        self._nonblocking = False
        # Tools whose last reply to a lone caller took longer than the polling window: their next reply is slept on.
        self._slow_methods = set()
        # The poll(2) object a blocking read sleeps in (see _wait_readable): made on first need, False without `select`.
        self._poller = None
        if hasattr(posix, "register_at_fork"):
            posix.register_at_fork(after_in_child=self._mark_forked)
        try:
            posix.set_blocking(descriptor, True)
        except OSError as error:
            self._broken = "the tool channel is not available (%s)" % error

    def _mark_forked(self):
        self._forked = True

    def _encode(self, message):
        try:
            return (self._encode_json(message) + "\n").encode("utf-8", "surrogatepass")
        except (TypeError, ValueError, RecursionError) as error:
            raise _unsendable(message.get("method"), error) from None

    def _encode_call(self, request_id, method, params):
        # The hot path of every call: the envelope is a template, the method's JSON is made once per tool.
        head = self._frame_heads.get(method)
        if head is None:
            head = self._frame_heads[method] = ',"method":%s,"params":' % self._encode_string(method)
        try:
            body = self._encode_json(params)
        except (TypeError, ValueError, RecursionError) as error:
            raise _unsendable(method, error) from None
        return ('{"id":%d%s%s}\n' % (request_id, head, body)).encode("utf-8", "surrogatepass")

    def _send(self, frame):
        with self._write_lock:
            try:
                written = posix.write(self._descriptor, frame)
            except BlockingIOError:
                # The descriptor was left non-blocking by a polling read and the host is not reading yet.
                written = 0
            if written < len(frame):
                view = memoryview(frame)[written:]
                interrupted = None
                while view:
                    try:
                        view = view[posix.write(self._descriptor, view):]
                    except BlockingIOError:
                        self._set_blocking()
                    except KeyboardInterrupt as error:
                        # Half a frame would corrupt the channel for every later call: finish it, then interrupt.
                        interrupted = error
                if interrupted is not None:
                    raise interrupted

    def _set_blocking(self):
        self._nonblocking = False
        posix.set_blocking(self._descriptor, True)

    def decode(self, line):
        """Decodes one frame (without its newline); raises ValueError when it is not JSON."""
        return self._decode_json(line)

    def stop_writes(self, timeout):
        """Takes the write lock for good (the process is ending): waits up to `timeout` seconds for a frame a thread
        is writing; says whether it got the lock, so the caller may write the last frame whole."""
        return self._write_lock.acquire(timeout=timeout)

    def _register(self, method, params, pending):
        # What the script printed before the call reaches the host before the call does.
        flush_output()
        if self._forked:
            raise ToolError("%s: tools cannot be called from a forked child process; call them from the script's "
                            "own process (threads and asyncio work)" % method, tool=method)
        with self._lock:
            if self._broken is not None:
                raise ToolError("%s: %s" % (method, self._broken), tool=method, code=ChannelErrorCode.RUN_ENDED)
            self._next_id += 1
            request_id = self._next_id
            self._pending[request_id] = pending
        try:
            frame = self._encode_call(request_id, method, params)
            if len(frame) > self._max_frame_bytes:
                raise ToolError("%s: arguments are %d bytes, over the channel's frame limit of %d bytes; send less "
                                "per call" % (method, len(frame), self._max_frame_bytes), tool=method,
                                code=ChannelErrorCode.FRAME_TOO_LARGE)
            try:
                self._send(frame)
            except OSError as error:
                raise ToolError("%s: the tool channel is closed (%s)" % (method, error), tool=method,
                                code=ChannelErrorCode.RUN_ENDED) from None
        except ToolError:
            with self._lock:
                self._pending.pop(request_id, None)
            raise

    def call(self, method, params):
        pending = _PendingCall()
        self._register(method, params, pending)
        lock = self._lock
        with lock:
            self._async_recent = False
            if self._reading:
                self._waiting += 1
                try:
                    while pending.reply is None and self._reading:
                        self._wait_for_turn(pending)
                finally:
                    self._waiting -= 1
                if pending.reply is not None:
                    return _settle(method, pending.reply)
            self._reading = True
        try:
            # Polling pays only for a lone sequential caller; with other threads waiting it would hold the GIL.
            if pending.reply is None and not self._waiting and not self._async_loops and len(self._pending) == 1:
                self._read_and_dispatch(method)
            while pending.reply is None:
                self._read_and_dispatch()
        finally:
            self._release_reader()
        reply = pending.reply
        # The usual outcome, settled inline (see _settle for the rest).
        if "result" in reply:
            return reply["result"]
        return _settle(method, reply)

    async def acall(self, method, params):
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._async_loops[loop] = self._async_loops.get(loop, 0) + 1
        try:
            self._register(method, params, _PendingAsyncCall(loop, future))
            with self._lock:
                self._async_recent = True
                if not self._reading and not self._watch_from(loop):
                    self._reading = True
                    self._start_reader_thread()
            reply = await future
        finally:
            with self._lock:
                left = self._async_loops.pop(loop) - 1
                if left:
                    self._async_loops[loop] = left
                elif self._loop_reader is loop and _running_loop() is loop:
                    # The loop's last call ended (answered, or cancelled as the loop ends): it stops watching.
                    self._stop_watching()
        return _settle(method, reply)

    def _watch_from(self, loop):
        """Has `loop` (the running loop) watch the channel for its coroutines' replies, unless another loop does;
        says whether it does. Called with the lock held, nobody reading."""
        watcher = self._loop_reader
        if watcher is loop:
            return True
        if watcher is not None and not watcher.is_closed():
            return False
        self._loop_reader = None
        try:
            loop.add_reader(self._descriptor, self._on_loop_readable, loop)
        except Exception:
            # A loop without readers (or one that refuses this descriptor): a reader thread serves it.
            return False
        self._loop_reader = loop
        return True

    def _stop_watching(self):
        """The watching loop (running in this thread) stops watching the channel. Called with the lock held."""
        loop = self._loop_reader
        self._loop_reader = None
        try:
            loop.remove_reader(self._descriptor)
        except Exception:
            pass

    def _on_loop_readable(self, loop):
        """Reads what came for the watching loop's coroutines, in the loop, without blocking it: a thread that reads
        already keeps reading (the loop stops watching: the channel would stay readable for it until that thread has
        read), and one that wants to read while the loop is busy elsewhere reads (nobody reading), so no thread ever
        waits for the loop to come round. A failed channel, or a loop with no call waiting, stops the watch; then
        whoever needs the reading gets it (see _hand_over_reading)."""
        with self._lock:
            if self._loop_reader is not loop:
                return
            if self._reading:
                self._stop_watching()
                return
            self._reading = True
        try:
            self._read_and_dispatch(nonblocking=True)
        finally:
            with self._lock:
                self._reading = False
                if self._broken is not None or loop not in self._async_loops:
                    self._stop_watching()
                self._hand_over_reading()

    def _start_reader_thread(self):
        _thread.start_new_thread(self._reader_loop, ())

    def _reader_loop(self):
        try:
            while True:
                with self._lock:
                    idle = not self._pending
                    # A failed channel stays readable (at its end): waiting on it for the next call would spin.
                    if idle and (not self._async_recent or self._broken is not None):
                        return
                # Nothing to read for: wait a while for the next asynchronous call's reply (or a notification).
                if idle and not self._wait_readable(_READER_LINGER_MILLISECONDS):
                    with self._lock:
                        if not self._pending:
                            return
                    continue
                self._read_and_dispatch()
        finally:
            self._release_reader()

    def _wait_for_turn(self, pending):
        """Sleeps until the reply of `pending` arrives or its thread is woken to read the channel. Called with the
        lock held; releases it while it sleeps.

        Each thread sleeps on a lock of its own, so a reply wakes its own caller alone, and the end of a reader's
        turn wakes one other thread to read; with one condition for all, every batch of replies woke every waiting
        thread (7 of 8 threads calling at once), and all but one went back to sleep."""
        waiter = _thread.allocate_lock()
        waiter.acquire()
        pending.waiter = waiter
        sleeping = self._sleeping_calls
        sleeping[pending] = None
        self._lock.release()
        try:
            waiter.acquire()
        except BaseException:
            self._lock.acquire()
            sleeping.pop(pending, None)
            if pending.waiter is waiter:
                pending.waiter = None
            elif pending.reply is None and not self._reading:
                # Woken to read the channel, but leaving (interrupted): another thread reads instead.
                self._hand_over_reading()
            raise
        self._lock.acquire()
        sleeping.pop(pending, None)

    def _wake_reader(self):
        """Wakes the thread that has slept longest for its reply, which then reads the channel; says whether there was
        one. Called with the lock held."""
        sleeping = self._sleeping_calls
        while sleeping:
            pending = next(iter(sleeping))
            del sleeping[pending]
            if pending.waiter is not None:
                pending.wake()
                return True
        return False

    def _release_reader(self):
        with self._lock:
            self._reading = False
            self._hand_over_reading()

    def _hand_over_reading(self):
        """Gives the reading of the channel, which nobody has, to who needs it: the thread that has slept longest for
        its reply; else, while asynchronous calls wait, a new reader thread; else the threads waiting for a
        notification. Called with the lock held.

        `_waiting` also counts threads whose reply was handed to them and that have not run since: they read for
        nobody, so they are no reason to leave asynchronous calls without a reader (a run then hung, its awaited
        reply unread for good). A thread waiting for a notification is woken by the reader thread when it reads one
        or ends."""
        if self._wake_reader():
            return
        if self._async_loops and self._pending and not self._watched_for_all():
            self._reading = True
            self._start_reader_thread()
        elif self._waiting:
            self._replied.notify_all()

    def _watched_for_all(self):
        """Whether a loop watching the channel serves every asynchronous call waiting (they are all its own). Called
        with the lock held."""
        watcher = self._loop_reader
        if watcher is None or watcher.is_closed():
            return False
        return all(loop is watcher for loop in self._async_loops)

    def _read_alone(self, view, method):
        """Reads the next chunk into `view` for a lone caller of `method`: while that tool's replies have been coming
        quickly, polls for up to _REPLY_POLL_NANOSECONDS first; then sleeps in a blocking read. Returns the bytes read
        (0 at the end)."""
        started = _clock()
        slow_methods = self._slow_methods
        if method not in slow_methods:
            count = self._poll_read(view, started + _REPLY_POLL_NANOSECONDS)
            if count is not None:
                return count
        count = self._read_blocking(view)
        if _clock() - started > _REPLY_POLL_NANOSECONDS:
            slow_methods.add(method)
        else:
            slow_methods.discard(method)
        return count

    def _poll_read(self, view, deadline):
        """Reads into `view` without sleeping, polling until `deadline` (a _clock() value); returns the bytes read, or
        None when nothing came by then."""
        descriptor = self._descriptor
        if not self._nonblocking:
            posix.set_blocking(descriptor, False)
            self._nonblocking = True
        while True:
            try:
                return posix.readv(descriptor, [view])
            except BlockingIOError:
                if _clock() > deadline:
                    return None
                # Whatever else is runnable here (the host serving other scripts, say) goes first: polling stays off
                # the critical path of a busy machine.
                _yield_processor()

    def _read_blocking(self, view):
        if self._nonblocking:
            self._set_blocking()
        self._wait_readable()
        return posix.readv(self._descriptor, [view])

    def _wait_readable(self, timeout=None):
        """Sleeps until the channel has bytes to read, or is closed, or `timeout` milliseconds passed; says whether it
        is readable. A read sleeping in the kernel would be woken in vain each time the host reads a call (the socket
        then signals room to write, and a read waits on the same queue): poll(2) sleeps for input alone. Without
        `select`, the read sleeps itself, and a wait with a timeout says False at once."""
        poller = self._poller
        if poller is None:
            try:
                import select
            except ImportError:
                self._poller = False
                return timeout is None
            poller = self._poller = select.poll()
            poller.register(self._descriptor, select.POLLIN)
        if not poller:
            return timeout is None
        return bool(poller.poll(timeout)) or timeout is None

    def _make_room(self, position, end, needed):
        """Moves the unread bytes `_buffer[position:end]` to the front of a buffer that has room for `needed` bytes
        from there; returns their new end."""
        kept = end - position
        buffer = self._buffer
        if len(buffer) < needed:
            grown = bytearray(max(needed, 2 * len(buffer)))
            grown[:kept] = memoryview(buffer)[position:end]
            self._buffer = grown
        elif position:
            buffer[:kept] = buffer[position:end]
        return kept

    def _read_and_dispatch(self, alone=None, nonblocking=False):
        """Reads what the host sent and hands replies to their callers; `alone` is the tool a lone caller waits for
        (see _read_alone); `nonblocking`: read only what is there now (nothing, maybe; the rest of a reply whose start
        came is still waited for)."""
        start = self._buffered
        if start == len(self._buffer):
            # A frame longer than the buffer: room for more of it.
            self._make_room(0, start, 2 * start)
        try:
            view = memoryview(self._buffer)[start:]
            if nonblocking:
                count = self._poll_read(view, _clock())
                if count is None:
                    return
            else:
                count = self._read_blocking(view) if alone is None else self._read_alone(view, alone)
        except OSError as error:
            self._fail_all("the tool channel failed (%s)" % error)
            return
        finally:
            view = None
        if not count:
            self._fail_all("the tool channel was closed by the host (the run has ended)")
            return
        end = start + count
        if self._buffer.find(b"\n", start, end) == -1:
            # Part of a frame: keep it where it is and read on.
            self._buffered = end
            if end > self._max_frame_bytes:
                self._fail_all("a reply exceeded the channel's frame limit of %d bytes" % self._max_frame_bytes)
            return
        replies = self._split_replies(end, alone is not None)
        if replies is None:
            return
        with self._lock:
            pending = self._pending
            for reply in replies:
                if type(reply) is not dict:
                    continue
                waiting = pending.pop(reply.get("id"), None)
                if waiting is None:
                    method = reply.get("method")
                    if reply.get("id") is None and type(method) is str and method.startswith(NOTIFICATION_PREFIX):
                        self._notifications.append(reply)
                    continue
                waiting.deliver(reply)
            if self._notifications and self._waiting:
                # Threads waiting for replies were woken by their own; one waiting for a notification may have it.
                self._replied.notify_all()

    def _split_replies(self, end, alone):
        """The replies in `_buffer[:end]` (frames, and the raw text following a frame that has some, read in full
        here); keeps an incomplete last frame at the front of the buffer for the next read. None when the channel
        failed. `alone`: a lone caller reads (see _read_at_least)."""
        decode = self._decode_json
        buffer = self._buffer
        replies = []
        position = 0
        while position < end:
            newline = buffer.find(b"\n", position, end)
            if newline == -1:
                break
            line = buffer[position:newline]
            position = newline + 1
            if not line:
                continue
            try:
                reply = decode(line)
            except (ValueError, StopIteration):
                continue
            if type(reply) is dict and RAW_TEXT_FIELD in reply:
                segments = reply.pop(RAW_TEXT_FIELD)
                raw_size = _raw_text_size(segments)
                if raw_size is None or raw_size + len(line) > self._max_frame_bytes:
                    self._fail_all("a reply exceeded the channel's frame limit of %d bytes" % self._max_frame_bytes)
                    return None
                if end - position < raw_size:
                    # The rest of the text is read into the buffer, behind what it has of it: where it lies when
                    # the buffer has room for all of it there, else at the front of a buffer that has.
                    if position + raw_size > len(buffer):
                        end = self._make_room(position, end, raw_size + _READ_BYTES)
                        buffer = self._buffer
                        position = 0
                    end = self._read_at_least(position + raw_size, end, alone)
                    if end is None:
                        return None
                position = _fill_raw_text(reply, segments, buffer, position)
            replies.append(reply)
        kept = self._make_room(position, end, 0) if position < end else 0
        self._buffered = kept
        if len(self._buffer) > _KEPT_BUFFER_BYTES and kept <= _READ_BYTES:
            large = self._buffer
            self._buffer = bytearray(_READ_BYTES)
            self._buffer[:kept] = memoryview(large)[:kept]
        return replies

    def _read_at_least(self, size, end, alone):
        """Reads into the buffer after `end` until it holds `size` bytes; returns the new end, or None when the
        channel failed or was closed first.

        The rest of a reply to a lone caller (`alone`) is usually on its way: the host writes a reply in one writev,
        which the kernel queues in chunks of about 32 KiB, waking the reader at the first. So it polls for the rest
        for up to _REST_POLL_NANOSECONDS (yielding the processor between polls) before it sleeps: a reader that slept
        again would be woken once more per chunk. Replies to several threads or coroutines queue up on the host behind
        a full socket, and polling would take the processor the host needs to write them (measured: a gather of 100
        reads of 100 KB slowed under load): their reader sleeps at once."""
        view = memoryview(self._buffer)
        polling = alone
        deadline = _clock() + _REST_POLL_NANOSECONDS
        try:
            while end < size:
                try:
                    count = self._poll_read(view[end:], deadline) if polling else None
                    if count is None:
                        polling = False
                        count = self._read_blocking(view[end:])
                except InterruptedError:
                    continue
                except OSError as error:
                    self._fail_all("the tool channel failed (%s)" % error)
                    return None
                if not count:
                    self._fail_all("the tool channel was closed by the host (the run has ended)")
                    return None
                end += count
        finally:
            view.release()
        return end

    def next_notification(self):
        """Waits for the host's next notification (`$run`, `$cell`) while replies keep reaching their callers.

        Returns the message, or None once the channel is closed.
        """
        with self._lock:
            while True:
                if self._notifications:
                    return self._notifications.pop(0)
                if self._broken is not None:
                    return None
                if not self._reading:
                    self._reading = True
                    break
                self._waiting += 1
                try:
                    self._replied.wait()
                finally:
                    self._waiting -= 1
        try:
            while not self._notifications and self._broken is None:
                self._read_and_dispatch()
        finally:
            self._release_reader()
        with self._lock:
            return self._notifications.pop(0) if self._notifications else None

    def _fail_all(self, reason):
        with self._lock:
            self._broken = reason
            pending = list(self._pending.values())
            self._pending.clear()
            failure = {"error": {"code": ChannelErrorCode.RUN_ENDED, "message": reason}}
            for waiting in pending:
                waiting.deliver(failure)
            self._replied.notify_all()

    def notify(self, method, params):
        self.send_encoded(self._encode({"method": method, "params": params}))

    def send_encoded(self, frame):
        """Sends a notification the caller encoded (the frame's bytes, newline included); a closed channel is not an
        error."""
        try:
            self._send(frame)
        except (OSError, ToolError):
            pass


class _Condition:
    """`threading.Condition` reduced to what the channel needs, on `_thread` locks (no `threading` import)."""

    def __init__(self, lock):
        self._lock = lock
        self._waiters = []

    def wait(self):
        """Releases the lock until `notify_all`, then takes it again. Called with the lock held."""
        waiter = _thread.allocate_lock()
        waiter.acquire()
        self._waiters.append(waiter)
        self._lock.release()
        woken = False
        try:
            waiter.acquire()
            woken = True
        finally:
            self._lock.acquire()
            if not woken:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def notify_all(self):
        """Wakes every waiting thread. Called with the lock held."""
        waiters = self._waiters
        self._waiters = []
        for waiter in waiters:
            waiter.release()


def _json_codec():
    """Compact JSON encoding of a value and of a string (no NaN, UTF-8 kept) and decoding of one frame, from the C
    accelerator when present.

    `_json` alone imports in a fraction of a millisecond; the `json` package pulls in `re`, `enum` and more.
    """
    try:
        import _json

        encode_string = _json.encode_basestring

        def refuse(value):
            raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)

        # No circular-reference memo (it would outlive a failed frame): a cycle ends in RecursionError instead.
        encoder = _json.make_encoder(None, refuse, encode_string, None, ":", ",", False, False, False)

        def encode(value):
            return "".join(encoder(value, 0))

        class _Context:
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__
            memo = {}

        scan = _json.make_scanner(_Context())

        def decode(line):
            text = line.decode("utf-8", "surrogatepass")
            value, end = scan(text, 0)
            if end != len(text) and text[end:].strip():
                raise ValueError("extra data after the JSON value")
            return value

        return encode, encode_string, decode
    except (ImportError, AttributeError):
        import json

        encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
        return encode, encode, json.loads


def _raw_text_size(segments):
    """Bytes of raw text a reply announces, or None when its list is not `[[key, bytes], ...]`."""
    if type(segments) is not list:
        return None
    total = 0
    for segment in segments:
        if type(segment) is not list or len(segment) != 2 or type(segment[1]) is not int or segment[1] < 0:
            return None
        total += segment[1]
    return total


def _fill_raw_text(reply, segments, data, position):
    """Puts the raw text following a frame into its reply; returns where the next frame starts. The bytes may be
    invalid UTF-8 (read_file sends a file's bytes unchecked): "replace" gives the text Node's decoder would, each
    invalid sequence one U+FFFD."""
    view = memoryview(data)
    result = reply.get("result")
    for key, size in segments:
        text = str(view[position:position + size], "utf-8", "replace")
        position += size
        if key is None:
            reply["result"] = text
        elif type(result) is dict and type(key) is str:
            result[key] = text
    return position


def _resolve_future(future, reply):
    if not future.done():
        future.set_result(reply)


def _settle(method, reply):
    error = reply.get("error")
    if error is None:
        return reply.get("result")
    if type(error) is dict:
        raise ToolError(str(error.get("message", "tool call failed")), tool=method,
                        code=error.get("code", ChannelErrorCode.TOOL_FAILED))
    raise ToolError(str(error), tool=method)


def _unsendable(method, error):
    return ToolError("%s: arguments cannot be sent as JSON (%s)" % (method, error), tool=method,
                     code=ChannelErrorCode.INVALID_ARGUMENTS)


_channel = None


def _running_loop():
    """The event loop running in this thread, or None (asyncio not imported, or no loop running)."""
    asyncio = sys.modules.get("asyncio")
    return None if asyncio is None else asyncio._get_running_loop()


_channel_lock = _thread.allocate_lock()


def get_channel():
    """The channel of this process, opened on first use; raises ToolError when the script is not run by codecall."""
    global _channel
    with _channel_lock:
        if _channel is None:
            environment = posix.environ
            descriptor = int(environment.get(BootVariable.CHANNEL_FILE_DESCRIPTOR.encode(), b"-1"))
            if descriptor < 0:
                raise ToolError("no tool channel: this script is not running under codecall",
                                code=ChannelErrorCode.RUN_ENDED)
            max_frame_bytes = environment.get(BootVariable.MAX_FRAME_BYTES.encode())
            _channel = _Channel(descriptor,
                                DEFAULT_MAX_FRAME_BYTES if max_frame_bytes is None else int(max_frame_bytes))
    return _channel


def call(method, params):
    """Calls the host tool `method` with keyword arguments `params`; returns its result or raises ToolError."""
    return (_channel or get_channel()).call(method, params)


async def acall(method, params):
    """Async variant of `call`: awaitable, so `asyncio.gather` runs many calls at once."""
    return await (_channel or get_channel()).acall(method, params)


def send_notification(method, params):
    """Sends a notification (`$exception`, ...) to the host; a closed or missing channel is not an error."""
    try:
        get_channel().notify(method, params)
    except ToolError:
        pass


def stop_writes(timeout):
    """The process is ending: no thread may start a frame from now on. Waits up to `timeout` seconds for a frame
    being written; says whether the channel is free for the last frame (also when no channel was opened)."""
    return _channel is None or _channel.stop_writes(timeout)


def json_parse(text, default=None):
    """Parses JSON text; returns `default` when it is not valid JSON. Values that are already parsed pass through.

    Lenient the way model-written input needs: control characters inside strings and a leading byte-order mark are
    accepted (`json.loads(strict=False)`)."""
    if not isinstance(text, (str, bytes, bytearray)):
        return text
    import json

    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError:
            return default
    try:
        return json.loads(text.lstrip("\ufeff"), strict=False)
    except ValueError:
        return default


def shell_quote(value):
    """Quotes a value for safe use as one word in a POSIX shell command line."""
    import shlex

    return shlex.quote(str(value))


def retry(function, *args, max_attempts=3, delay=1.0, backoff=2.0, exceptions=(Exception,), attempts=None,
          **kwargs):
    """Calls `function(*args, **kwargs)` up to `max_attempts` times, on any exception by default (narrow it with
    `exceptions`), waiting `delay` seconds before the second try and `backoff` times longer before each next one.
    `attempts` is an older name of `max_attempts`."""
    import time

    if attempts is not None:
        max_attempts = attempts
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    wait = delay
    for attempt in range(1, max_attempts + 1):
        try:
            return function(*args, **kwargs)
        except exceptions:
            if attempt == max_attempts:
                raise
            time.sleep(wait)
            wait *= backoff


def search_catalog(catalog, query, limit=10):
    """Ranks catalog rows `(name, signature, description)` against the words of `query`; best first."""
    words = [word for word in str(query).lower().replace("_", " ").replace(".", " ").split() if word]
    scored = []
    for position, (name, signature, description) in enumerate(catalog):
        short_name = name.rsplit(".", 1)[-1].lower()
        haystack_name = name.lower().replace("_", " ").replace(".", " ")
        haystack_description = description.lower()
        score = 0
        for word in words:
            if word == short_name:
                score += 10
            if word in haystack_name:
                score += 5
            if word in haystack_description:
                score += 1
        if score or not words:
            scored.append((-score, position, name, signature, description))
    scored.sort()
    return [{"name": name, "signature": signature, "description": description}
            for _, _, name, signature, description in scored[:max(0, int(limit))]]


# Raw bytes per `$artifact` frame at most (base64 makes them a third larger): well below the default frame limit.
_ARTIFACT_CHUNK_BYTES = 3 << 16
# Bytes the rest of an `$artifact` frame (its name and fields) may take besides the data.
_ARTIFACT_FRAME_OVERHEAD = 4096
_S_IFMT = 0o170000
_S_IFREG = 0o100000
# Names given to artifacts of the running run or cell (each is sent once; a second one gets `-2`, `-3`...).
_artifact_names = set()
# Working-directory images sent already: (name, modification time, size).
_sent_images = set()


def _artifact_name(name):
    name = str(name)
    if (not name or name.startswith(".") or ".." in name or "/" in name or "\\" in name
            or any(ord(character) < 32 or 127 <= ord(character) < 160 for character in name)
            or len(name.encode("utf-8", "surrogatepass")) > 255):
        raise ValueError("an artifact name is one plain file name such as 'chart.png' (no '/', '..', leading '.' "
                         "or control characters, at most 255 bytes): %r" % (name,))
    if name in _artifact_names:
        stem, dot, extension = name.rpartition(".")
        if not stem:
            stem, dot, extension = name, "", ""
        index = 2
        while "%s-%d%s%s" % (stem, index, dot, extension) in _artifact_names:
            index += 1
        name = "%s-%d%s%s" % (stem, index, dot, extension)
    _artifact_names.add(name)
    return name


def _send_artifact(name, read, mime_type=None):
    """Sends one artifact as `$artifact` frames; `read(size)` gives its next bytes (empty at the end)."""
    import binascii

    channel = get_channel()
    size = min(_ARTIFACT_CHUNK_BYTES, (channel._max_frame_bytes - _ARTIFACT_FRAME_OVERHEAD) * 3 // 4)
    size = max(3, size - size % 3)
    offset = 0
    piece = read(size)
    while True:
        following = read(size) if len(piece) == size else b""
        params = {"name": name, "offset": offset, "data": binascii.b2a_base64(piece, newline=False).decode("ascii"),
                  "final": not following}
        if offset == 0 and mime_type:
            params["mimeType"] = str(mime_type)
        channel._send(channel._encode({"method": ARTIFACT_NOTIFICATION, "params": params}))
        if not following:
            return
        offset += len(piece)
        piece = following


def save_artifact(name, data, mime_type=None):
    """Saves `data` (bytes, or str written as UTF-8) as a file returned to the caller with the result, under `name`
    (one plain file name such as "table.csv"; a name already used gets a suffix). Returns the name it was saved as."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    elif not isinstance(data, bytes):
        raise TypeError("save_artifact takes bytes or str data, not %s" % type(data).__name__)
    name = _artifact_name(name)
    position = [0]

    def read(size):
        start = position[0]
        position[0] = start + size
        return data[start:start + size]

    _send_artifact(name, read, mime_type)
    return name


def _send_file(directory, name):
    """Sends the regular file `directory/name` (never through a link, never a FIFO) as an artifact."""
    try:
        descriptor = posix.open(directory + "/" + name, posix.O_RDONLY | posix.O_NOFOLLOW | posix.O_NONBLOCK)
    except OSError:
        return None
    try:
        status = posix.fstat(descriptor)
        if status.st_mode & _S_IFMT != _S_IFREG:
            return None
        _send_artifact(_artifact_name(name), lambda size: posix.read(descriptor, size))
        return status
    except (OSError, ValueError):
        return None
    finally:
        posix.close(descriptor)


def send_open_figures():
    """Sends every matplotlib figure still open (shown with plt.show() under Agg, or never shown) as a PNG artifact
    `figure-N.png`, then closes them."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    import io

    for number in pyplot.get_fignums():
        buffer = io.BytesIO()
        try:
            pyplot.figure(number).savefig(buffer, format="png")
        except Exception:
            continue
        value = buffer.getvalue()
        save_artifact("figure-%d.png" % number, value, "image/png")
    pyplot.close("all")


def send_pending_artifacts(artifacts_directory, work_directory_since=None):
    """The end of a run or a cell: sends what it left to return. The files of `artifacts_directory` (top level,
    regular files only; each is removed once sent), every matplotlib figure still open (as PNG; then closed), and the
    images saved in the working directory since `work_directory_since` (nanoseconds; None: not looked at)."""
    if artifacts_directory:
        try:
            names = sorted(posix.listdir(artifacts_directory))
        except OSError:
            names = ()
        for name in names:
            if _send_file(artifacts_directory, name) is not None:
                try:
                    posix.unlink(artifacts_directory + "/" + name)
                except OSError:
                    pass
    send_open_figures()
    if work_directory_since is not None:
        for name in sorted(_new_images(work_directory_since)):
            try:
                status = posix.stat(name, follow_symlinks=False)
            except OSError:
                continue
            key = (name, status.st_mtime_ns, status.st_size)
            if key not in _sent_images and _send_file(".", name) is not None:
                _sent_images.add(key)
    _artifact_names.clear()


def _new_images(since):
    try:
        names = posix.listdir(".")
    except OSError:
        return []
    found = []
    for name in names:
        if name.lower().endswith(_IMAGE_SUFFIXES):
            try:
                status = posix.stat(name, follow_symlinks=False)
            except OSError:
                continue
            if status.st_mode & _S_IFMT == _S_IFREG and status.st_mtime_ns >= since:
                found.append(name)
    return found
