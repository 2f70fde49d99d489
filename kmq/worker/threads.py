"""The thread-pool path of `Worker`: plain-function handlers on `concurrency` threads fed from one queue."""

from __future__ import annotations

import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice

from kmq.client import KmqClient
from kmq.message import Message
from kmq.worker.breaker import BreakerState
from kmq.worker.core import RETRY_NOW, WorkerCore, now_ms
from kmq.worker.leases import lease_keys
from kmq.worker.outcome import OK, Handler, Outcome, outcome_of
from kmq.worker.settle import settle

_STOP = None
MAX_CHUNK = 32
MAX_QUICK_CHUNK = 128  # a handler that turns slow holds up at most this many quick ones behind it
CHUNK_S = 0.0005
# Ordered: a thread's chunks are mostly the few next messages of the keys it just ran. While a chunk's successes are
# fewer than this and chunks wait in the queue, the thread runs one of those too before it records them: one
# acquisition of the worker's lock then records more of them (taken every few messages, it convoyed the threads).
RECORD_AT = 16
# Threads are woken as the queued work needs them. Python threads share one interpreter lock: with quick handlers,
# more awake threads only add wake-ups and lock hand-overs (a no-op handler ran about a quarter slower on 8 threads
# than on 1). A parked thread is woken when the queued messages, at the handlers' recent time per message, would keep
# the awake threads busy longer than this.
BACKLOG_S = 0.005
FIRST_COST_S = 0.001  # a message's handling time assumed until some were measured (high: wake every thread)
COST_DECAY = 0.9  # weight of the earlier measurements in the running average, per chunk
# A queue nobody took from this long while threads are parked wakes one (the awake ones are all in long handlers)
STALLED_S = 0.01
# Quick handlers (under QUICK_S a message, measured): a handler thread with nothing queued receives the next batch
# itself and runs it, rather than the receiving loop handing it over (a hand-off to another thread costs more than a
# quick handler: both threads then take turns on the interpreter lock). The loop receives again once no handler thread
# did for LEAD_GAP_S (handlers got slow, or the one that received is in a long handler). The time measured is wall
# time, which a busy machine stretches: the bound leaves room for that, or the worker would switch back and forth.
QUICK_S = 0.00002
LEAD_GAP_S = 0.02
LEAD_WAIT_S = 0.05  # longest wait for room of a handler thread that takes turns (then it looks at its queue again)
Chunk = tuple[list[Message], list[int] | None, int | None]  # messages, their lease keys (None: not known), mark
# What a turn received: as `submit` takes them, and, when the thread runs them all itself (`_run_batch`), the run's
# lease (`WorkerCore.admit_run`; else None)
Led = tuple[list[Message], int, int | None, list[int] | None, int | None]


class HandlerThreads:
    """`concurrency` threads: each takes a message, checks the breaker lets it start, runs the handler, settles.

    With `kmq` markers, acknowledgements are left in `acked` for the lease thread to write (`write_acks`): END
    markers are then produced by the thread that produces the extensions, so an END can never overtake an extension
    of its message, and the handler threads do not contend for the producer. With `batch` markers a handler thread
    queues its chunk's acknowledgements itself: that produces nothing (the client's END thread writes them later), and
    an extension is produced under the core's lock, which the chunk's finish takes before the acknowledgements are
    queued, so the END still follows every extension of its message."""

    def __init__(
        self,
        core: WorkerCore,
        client: KmqClient,
        handler: Handler,
        concurrency: int,
        on_death: Callable[[str, BaseException], None],
        lead: Callable[[HandlerThreads], Led | None] | None = None,
    ) -> None:
        self._core, self._client, self._handler = core, client, handler
        # A receiving turn, for a handler thread to take while handlers are quick (see QUICK_S); `role` is held by
        # whoever takes a turn, the receiving loop included. `leading`: handler threads may take turns (not once
        # the worker stops: cleared with `role` held).
        self._lead = lead
        self.role = threading.Lock()
        self.leading = lead is not None
        self._led_at = 0.0  # when a handler thread's turn ended
        self.batches_led = 0  # batches a handler thread received and ran (written with `role` held)
        self.batches_in_order = 0  # of those, ordered, batches it ran in order by itself (`_run_batch`)
        self._lead_waiting = False  # a handler thread waits for room after a turn (a hint, read unlocked)
        self._current: _Run | None = None  # a batch its receiving thread runs itself (`_run_batch`)
        self._on_death = on_death  # a thread died on an unexpected error (not the handler's: those are outcomes)
        # Chunks, each with its lease keys when known and its mark when it was let start already (ordered:
        # `WorkerCore.may_start_marked`)
        self._queue: queue.SimpleQueue[Chunk | None] = queue.SimpleQueue()
        self._concurrency = concurrency
        self.draining = False  # shutdown: messages not started yet are nacked, not run
        self.acked: deque[Message] = deque()
        # Batch markers: a handler thread queues its acknowledgements itself (in C, no producer involved); else the
        # lease thread writes them (`write_acks`)
        self._ack = client.processed_many if client.ends_batched else self.acked.extend
        self._busy = [False] * concurrency  # each thread writes its own slot only
        # Parking (see BACKLOG_S): `_awake` threads take chunks; the others wait on their own event, the latest
        # parked first woken. Counts under `_pool`; the cost average is a hint written by every thread unlocked.
        self._pool = threading.Lock()
        self._awake = concurrency
        self._parked: list[int] = []
        self._unpark = [threading.Event() for _ in range(concurrency)]
        self._stopping = False
        self._cost_s, self._cost_n = FIRST_COST_S, 1.0  # decayed sums: handling seconds, messages
        self._taken_at = time.perf_counter()  # when a thread last took a chunk
        self._threads = [
            threading.Thread(target=self._serve, args=(i,), name=f"kmq-worker-{i}", daemon=True)
            for i in range(concurrency)
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, messages: list[Message], received: int = 0, mark: int | None = None, keys: list[int] | None = None
    ) -> None:
        """Hand messages to the threads: one by one while few are waiting, in small chunks when many are (a chunk
        costs one hand-off and one acknowledgement step; a slow handler then delays only its chunk-mates).

        `received`: the batch they came from, when larger (ordered: the heads of its lanes; the rest follow them on
        the same threads, see `_keep`): chunks are sized for the whole batch. `mark`: ordered, the messages were let
        start already, with this mark (None: the thread that takes a chunk lets it start). `keys`: their
        `lease_keys`, when the caller has them (else the thread that takes a chunk computes its own)."""
        self._put(self._chunks(messages, received, mark, keys))

    def _chunks(self, messages: list[Message], received: int, mark: int | None, keys: list[int] | None) -> list[Chunk]:
        size = self._chunk_size(max(len(messages), received))
        return [
            (messages[start : start + size], None if keys is None else keys[start : start + size], mark)
            for start in range(0, len(messages), size)
        ]

    def _chunk_size(self, received: int) -> int:
        """Messages per chunk for a batch of `received`."""
        size = max(1, min(MAX_CHUNK, received // (4 * self._concurrency)))
        cost_s = self._cost_per_message_s
        if cost_s * size < CHUNK_S:  # quick handlers: larger chunks, as long as one takes under CHUNK_S
            size = max(size, min(MAX_QUICK_CHUNK, int(CHUNK_S / cost_s)))
        return size

    def _put(self, chunks: list[Chunk]) -> None:
        put = self._queue.put
        for chunk in chunks:
            put(chunk)
        if chunks and self._lead_waiting:
            self._core.notify()  # a handler thread waiting for room after its turn serves the queue instead
        if chunks and self._parked:  # read unlocked: a hint (the last awake thread never parks)
            backlog_s = self._queue.qsize() * len(chunks[0][0]) * self._cost_per_message_s
            self._wake(math.ceil(backlog_s / BACKLOG_S) - self._awake)

    def handlers_lead(self) -> bool:
        """Whether handler threads receive now (see QUICK_S): one takes a turn, or took one within LEAD_GAP_S."""
        return self.leading and (self.role.locked() or self.led_recently())

    def led_recently(self) -> bool:
        """A handler thread's turn ended within LEAD_GAP_S."""
        return time.perf_counter() - self._led_at < LEAD_GAP_S

    def queued(self) -> bool:
        """Chunks wait in the queue."""
        return not self._queue.empty()

    def stop_leading(self) -> None:
        """No handler thread takes a receiving turn from now on (one taking a turn now ends it first)."""
        with self.role:
            self.leading = False

    def _try_lead(self, index: int) -> bool:
        """Nothing queued: while handlers are quick, take a receiving turn and run what it received here. False when
        this thread may not (handlers not quick, or another takes a turn)."""
        if (
            not self.leading
            or self._cost_per_message_s >= QUICK_S
            or self._current is not None  # (another thread's run: this one parks rather than share the work)
            or not self.role.acquire(blocking=False)
        ):
            return False
        run = None
        try:
            if not self.leading or self._lead is None or self._current is not None:  # stopped, or a run meanwhile
                return False
            led = self._lead(self)
            if led and led[0]:
                self.batches_led += 1
            if led and led[4] is not None:  # registered before the role is given back: the next turn sees it
                run = self._current = _Run(led[0], led[2] or 0, led[4])
                self.batches_in_order += self._core.gate is not None
        finally:
            self._led_at = time.perf_counter()
            self.role.release()
        if run is not None:
            self._run_batch(index, run)
        elif led is None:  # no room: until a handler frees some, or a chunk is queued (`_put`)
            self._lead_waiting = True
            if self._queue.empty():
                self._core.wake.wait(LEAD_WAIT_S)
            self._lead_waiting = False
        elif led[0]:
            first, *rest = self._chunks(*led[:4])
            self._put(rest)
            self._serve_item(index, first)
        return True

    def nudge(self) -> None:
        """Take over a run whose chunk took past `LEAD_GAP_S` (`take_over`), and wake a parked thread when chunks
        wait and none was taken for `STALLED_S`: the awake threads are all in handlers that take long (the loop and
        the lease thread call this every turn and tick)."""
        self.take_over_stalled()
        if self._parked and not self._queue.empty() and time.perf_counter() - self._taken_at > STALLED_S:
            self._wake(1)

    def take_over_stalled(self) -> bool:
        """Take over the run under way (`take_over`) when its chunk has taken past `LEAD_GAP_S` (a handler stuck, or
        slow); True when no run is under way now. The receiving loop calls this before it receives: it does not
        receive beside a run, which it would have to wait for once ordered."""
        run = self._current
        if run is None:
            return True
        if time.perf_counter() - run.chunk_at > LEAD_GAP_S:
            self.take_over(run)
            return True
        return False

    def _wake(self, count: int) -> None:
        with self._pool:
            for _ in range(min(count, len(self._parked))):
                self._awake += 1
                self._unpark[self._parked.pop()].set()

    def _park(self, index: int) -> bool:
        """Nothing queued: wait until woken, unless this is the last awake thread (it waits on the queue itself, or
        takes receiving turns, which serve the queue first). True when it parked."""
        event = self._unpark[index]
        with self._pool:
            if self._stopping or self._awake <= 1:
                return False
            self._awake -= 1
            event.clear()
            self._parked.append(index)
        event.wait()
        return True

    def _take(self, index: int) -> Chunk | None:
        """The next chunk (or `_STOP`), receiving while handlers are quick, parking while there is none and other
        threads are awake."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                if self._try_lead(index) or self._park(index):
                    continue
                item = self._queue.get()
            self._taken_at = time.perf_counter()
            return item

    @property
    def _cost_per_message_s(self) -> float:
        """The handlers' recent time per message (see BACKLOG_S)."""
        return self._cost_s / self._cost_n

    def _measured(self, elapsed_s: float, messages: int) -> None:
        """A chunk's handling time, into the running average of a message's (see BACKLOG_S)."""
        self._cost_s = self._cost_s * COST_DECAY + elapsed_s
        self._cost_n = self._cost_n * COST_DECAY + messages

    @property
    def awake(self) -> int:
        """Threads taking chunks (the others are parked until the queued work needs them)."""
        return self._awake

    @property
    def running(self) -> int:
        """Handlers running now."""
        return sum(self._busy)

    def write_acks(self) -> None:
        """END markers for the messages processed since the last call. The lease thread calls this while the worker
        runs, the shutdown once that thread has ended; each acknowledgement is written once even if two threads
        call it at once: taking one is a single atomic `popleft`, never a look at the backlog then a take."""
        take, processed = self.acked.popleft, self._client.processed
        while True:
            try:
                msg = take()
            except IndexError:  # drained (maybe by another caller meanwhile)
                return
            processed(msg)

    def drain(self) -> None:
        """Shutdown: messages not started yet are given back, not run; quick chunks running now stop before their
        next message (`WorkerCore.changes`)."""
        with self._core.lock:
            self.draining = True
            self._core.changes += 1

    def stop(self) -> None:
        """Let idle threads end (busy ones end after their handler; they are daemons either way)."""
        for _ in self._threads:
            self._queue.put(_STOP)
        with self._pool:
            self._stopping = True
        self._wake(len(self._threads))

    def _serve(self, index: int) -> None:
        try:
            self._serve_until_stopped(index)
        except BaseException as e:  # noqa: BLE001  # the worker stops as a whole, never runs on one thread short
            self._busy[index] = False
            self._on_death(threading.current_thread().name, e)

    def _serve_until_stopped(self, index: int) -> None:
        while (item := self._take(index)) is not _STOP:
            self._serve_item(index, item)

    def _serve_item(self, index: int, item: Chunk) -> None:
        chunk, keys, mark = item
        while chunk:  # ordered: the next messages of the chunk's lanes run on here (see `_keep`)
            if self.draining:
                self._give_back(chunk)
                break
            chunk, mark = self._serve_chunk(index, chunk, mark, keys)
            keys = None

    def _serve_chunk(
        self, index: int, chunk: list[Message], mark: int | None, keys: list[int] | None = None
    ) -> tuple[list[Message], int | None]:
        """Run a chunk; ordered, the messages that may start now (the next of its lanes) that this thread keeps,
        already marked started (with their mark). `keys`: the chunk's `lease_keys`, when known."""
        busy, core = self._busy, self._core
        if keys is None:
            keys = lease_keys(chunk)  # once, for the checks before each handler and for the leases' removal
        busy[index] = True
        started = time.perf_counter()
        quick = self._cost_per_message_s * len(chunk) < CHUNK_S
        if core.gate is None:
            done, done_keys = self._run(chunk, keys, quick)
        else:
            done, done_keys = self._run_ordered(chunk, keys, mark, quick)
            while len(done) < RECORD_AT and not self.draining and self._run_queued(done, done_keys):
                pass
        self._measured(time.perf_counter() - started, max(len(chunk), len(done)))
        busy[index] = False
        if not done:
            return [], None
        if core.gate is None:
            self._acknowledge(core.finish_ok(done, done_keys))
            return [], None
        # One lock for the chunk's successes and for letting the next of their lanes start (a lock per message
        # convoys the threads behind the GIL)
        owned, following, mark = core.finish_ordered(done, done_keys)
        self._acknowledge(owned)
        return (self._keep(following, mark), mark) if following else ([], None)

    def _run_queued(self, done: list[Message], done_keys: list[int]) -> bool:
        """Ordered: run a chunk waiting in the queue too, adding its successes to `done` (see `RECORD_AT`); False
        when none waits."""
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            return False
        if item is _STOP:
            self._queue.put(_STOP)  # for the loop, once this chunk is done
            return False
        chunk, keys, mark = item
        ran, ran_keys = self._run_ordered(chunk, keys or lease_keys(chunk), mark)
        done += ran
        done_keys += ran_keys
        return True

    def _run_batch(self, index: int, run: _Run) -> None:
        """Quick handlers: the batch this thread received runs here, in quick chunks (checked once a chunk, as `_run`
        checks one), rather than through the queue: a hand-off of its chunks, even back to this thread, costs more
        than they take, and other threads taking some leave them all taking turns on the interpreter lock.

        Ordered, it runs in offset order outside the lanes (`WorkerCore.admit_ordered`), and nothing else runs or
        is received meanwhile, so every key keeps its order with no lane bookkeeping. It stops at the first message
        it cannot run that way, and the rest enters the lanes: a handler raised (retried in place there, its key's
        later messages waiting behind it), handlers got slow (the rest then runs side by side), or something changed
        (the breaker, a lease, a revocation). Unordered, a failure is settled and the run goes on; handlers got slow,
        the rest is queued. The shutdown gives the rest back. A run whose chunk takes past `LEAD_GAP_S` is taken over
        (`take_over`): a handler stuck here holds up only itself."""
        core, gate, busy = self._core, self._core.gate, self._busy
        breaker, leases = core.breaker, core.leases
        size, start = self._chunk_size(len(run.messages)), 0
        busy[index] = True  # for the whole run: the shutdown's grace period waits for it
        try:
            while start < len(run.messages):
                changes = core.changes  # (before the checks: a chunk stops once it moves)
                if self.draining:
                    self._end_run(run, give_back=True)
                    return
                if (
                    self._cost_per_message_s >= QUICK_S
                    or (gate is not None and run.mark != gate.revocations)
                    or breaker.state is not BreakerState.CLOSED
                    or not (
                        leases.run_held(run.lease)
                        or all(map(leases.held.__contains__, run.lease_keys()[start : start + size]))
                    )
                ):
                    self.take_over(run)  # (unordered, the rest then goes through the queue's checks)
                    return
                run.chunk_at = started = time.perf_counter()
                ran, error = self._run_pulled(run.pull(size), changes)
                self._measured(time.perf_counter() - started, max(ran, 1))
                if not self._finish_chunk(run, start, ran, error):
                    return
                start += ran + (error is not None)
            self._end_run(run)
        finally:
            busy[index] = False

    def _run_pulled(self, chunk: Iterator[Message], changes: int) -> tuple[int, Exception | None]:
        """A run's chunk, each message taken from its iterator as it starts (what a `take_over` drains never runs
        here): how many handlers returned, and the exception of the next one when it raised (else None: the core's
        change count moved, or the chunk is done). The change count is read before the first message and after each
        (before each, a message would be taken from the iterator and then not run)."""
        core, handler, ran = self._core, self._handler, 0
        if core.changes != changes:
            return 0, None  # (moved since the caller's checks: it checks again)
        try:
            for msg in chunk:
                handler(msg)
                ran += 1
                if core.changes != changes:
                    break
        except Exception as e:  # noqa: BLE001  # any failure of the application's code is an outcome
            return ran, e
        return ran, None

    def _finish_chunk(self, run: _Run, start: int, ran: int, error: Exception | None) -> bool:
        """Settle a run's chunk (`ran` handlers returned from `start` on, then `error` from the next's); False when
        the run is over: taken over, or, ordered, stopped by the failure (which then enters the lanes)."""
        core, gate = self._core, self._core.gate
        done = run.messages[start : start + ran]
        failed = run.messages[start + ran] if error is not None else None
        stops = gate is not None and failed is not None
        owned: list[Message] = []
        with core.lock:
            going_on = not run.taken and not stops
            if going_on:
                run.finished = start + ran + (failed is not None)
                owned = core.settle_run_ok(run.lease, done)
        if going_on:
            self._acknowledge(owned)
            if failed is not None:  # unordered: settled alone (the run's next message), and the run goes on
                self._settle_failed(failed, error, run.lease)
            return True
        if stops:
            self.take_over(run, failed)  # (taken over meanwhile: that entered the same message as its lane's head)
        done_keys = run.lease_keys()[start : start + ran]  # (taken over: its leases are keyed now)
        head = run.head  # ordered, taken over: this thread's last message, its lane's head now
        if head is not None and any(msg is head for msg in done):
            done_keys = [key for msg, key in zip(done, done_keys, strict=True) if msg is not head]
            done = [msg for msg in done if msg is not head]
            owned, following, mark = core.finish_ordered([head])
            self._acknowledge(owned)
            self.submit(following, mark=mark)
        if done:
            self._acknowledge(core.finish_ok(done, done_keys))
        if failed is not None:
            if gate is None:
                self._settle_failed(failed, error)
            elif head is failed:
                self._finish_ordered(failed, outcome_of(error, failed))  # type: ignore[arg-type]
            # (else dropped by the take-over, its partition revoked: its START runs out, the tracker redelivers it)
        return False

    def _settle_failed(self, msg: Message, error: Exception | None, run_lease: int | None = None) -> None:
        """Unordered: a handler raised `error` on `msg` (`run_lease`: the next message of that run, `finish`)."""
        assert error is not None
        outcome = outcome_of(error, msg)
        if self._core.finish(msg, outcome, run_lease):
            settle(self._client, msg, outcome)

    def take_over(self, run: _Run | None = None, failed: Message | None = None) -> None:
        """End a run early (`run`, default the one under way, if any): what it has not started is taken from it and
        queued (ordered: entered in the lanes, behind its last message, which entered as its lane's running head).
        By the receiving loop before it receives, by `nudge` once a chunk took past `LEAD_GAP_S`, and by the run's own
        thread (`failed`: the message whose handler raised, the last it ran)."""
        run = run or self._current
        if run is None:
            return
        core, gate = self._core, self._core.gate
        with core.lock:
            if run.taken or run.over:
                return
            run.taken = True
            rest = list(run.left)  # (atomic: each message goes to this list or to the run's next pull, never both)
            core.leases.unrun(run.lease)  # the rest goes through the queue's (or lanes') checks, which look keys up
            if gate is None:
                heads, mark = rest, None
            else:
                pulled = len(run.messages) - len(rest)
                last = failed if failed is not None else run.messages[pulled - 1] if pulled > run.finished else None
                handed = [last, *rest] if last is not None else rest
                heads, mark = core.hand_over_locked(handed, run.mark, now_ms(), first_ran=last is not None)
                run.head = last if heads and heads[0] is last else None
                if run.head is not None:
                    heads = heads[1:]
        if self._current is run:
            self._current = None
        self.submit(heads, len(heads), mark)

    def _end_run(self, run: _Run, give_back: bool = False) -> None:
        """The run is over (`give_back`: the shutdown gives back what it has not started)."""
        core = self._core
        with core.lock:
            if run.taken:
                rest = []
            else:
                run.over = True
                rest = list(run.left)
                if core.gate is not None:
                    core.gate.in_order = False
        if self._current is run:
            self._current = None
        if give_back:
            self._give_back(rest)

    def _acknowledge(self, owned: list[Message]) -> None:
        """Queue the acknowledgements of messages settled OK (see the class docstring for who writes them)."""
        if owned:  # (none once the shutdown abandoned them: the client may be closed by then)
            self._ack(owned)

    def _keep(self, following: list[Message], mark: int) -> list[Message]:
        """Of the messages that may start now (the next of the lanes this thread just ran), those it runs itself.

        A hand-off through the queue per message (a put, a wake-up, a GIL switch) costs more than a short handler,
        and a key's messages mostly come one after another: the thread runs them on. Only while other threads are
        idle with nothing queued does it share them, so that a run of slow handlers spreads over the threads."""
        idle = self._concurrency - self.running  # this thread among them (read unlocked: a hint)
        if len(following) <= 1 or idle <= 1 or not self._queue.empty():
            return following
        keep = max(1, len(following) // idle)
        self.submit(following[keep:], mark=mark)
        return following[:keep]

    def _run(self, chunk: list[Message], keys: list[int], quick: bool = False) -> tuple[list[Message], list[int]]:
        """Run the handler on each message the breaker lets start: those it returned from, and their lease keys (the
        rest are settled here). One loop with no call but the handler's while the breaker is closed: this is the
        worker's cost per message.

        `quick`: the chunk is expected to take under `CHUNK_S`. Its checks (shutdown, breaker, lease held) are then
        made once, before its first message, and only the core's change count before each: once it moved (see
        `WorkerCore.changes`), or a handler raised, the rest is checked message by message."""
        core = self._core
        breaker, held = core.breaker, core.leases.held  # (`held` is never replaced, only changed)
        changes = core.changes
        if quick and not self.draining and breaker.state is BreakerState.CLOSED and all(map(held.__contains__, keys)):
            ran, error = self._back_to_back(chunk, changes)
            if error is None and ran == len(chunk):
                return chunk, keys
            rest = ran
            if error is not None:
                msg, rest = chunk[ran], ran + 1
                outcome = outcome_of(error, msg)
                if core.finish(msg, outcome):
                    settle(self._client, msg, outcome)
            done, done_keys = self._run_checked(chunk[rest:], keys[rest:])
            return chunk[:ran] + done, keys[:ran] + done_keys
        return self._run_checked(chunk, keys)

    def _back_to_back(self, chunk: list[Message], changes: int) -> tuple[int, Exception | None]:
        """A quick chunk's handlers, one after another, with no check but the core's change count (still `changes`)
        before each: how many returned, and the exception of the next one when it raised (else None: the count
        moved, or the chunk is done)."""
        core, handler, ran = self._core, self._handler, 0
        try:
            for msg in chunk:
                if core.changes != changes:
                    break  # a revocation, the breaker, an expiry, the stop: the caller checks the rest one by one
                handler(msg)
                ran += 1
        except Exception as e:  # noqa: BLE001  # any failure of the application's code is an outcome
            return ran, e
        return ran, None

    def _run_checked(self, chunk: list[Message], keys: list[int]) -> tuple[list[Message], list[int]]:
        """`_run` with the checks before each message."""
        core, handler, done, done_keys = self._core, self._handler, [], []
        breaker, held = core.breaker, core.leases.held
        for msg, key in zip(chunk, keys, strict=True):
            if self.draining:
                self._give_back([msg])
                continue
            if breaker.state is BreakerState.CLOSED:  # read unlocked: at worst one more starts as it opens
                if key not in held:
                    continue  # expired or abandoned while it waited
            elif not core.may_start(msg):
                continue
            try:
                handler(msg)
            except Exception as e:  # noqa: BLE001  # any failure of the application's code is an outcome
                outcome = outcome_of(e, msg)
                if core.finish(msg, outcome):
                    settle(self._client, msg, outcome)
            else:
                done.append(msg)
                done_keys.append(key)
        return done, done_keys

    def _run_ordered(
        self, chunk: list[Message], keys: list[int], mark: int | None, quick: bool = False
    ) -> tuple[list[Message], list[int]]:
        """`_run` under key or partition ordering: the chunk's heads are marked started under one lock (unless they
        were with `mark`), then each is checked without it before it runs (`WorkerCore.may_start_marked`).

        `quick` (see `_run`): the breaker and the leases are checked once, before the first message, and the core's
        change count before each (a revocation raises it: it drops heads let start but not run yet); the rest is
        checked message by message once it moved or a handler raised."""
        core, gate = self._core, self._core.gate
        assert gate is not None
        if mark is None:
            mark = core.start_ordered(chunk)
        breaker, held = core.breaker, core.leases.held
        changes = core.changes
        if (
            quick
            and not self.draining
            and mark == gate.revocations
            and breaker.state is BreakerState.CLOSED
            and all(map(held.__contains__, keys))
        ):
            ran, error = self._back_to_back(chunk, changes)
            if error is None and ran == len(chunk):
                return chunk, keys
            rest = ran
            if error is not None:
                self._finish_ordered(chunk[ran], outcome_of(error, chunk[ran]))
                rest = ran + 1
            done, done_keys = self._run_ordered_checked(chunk[rest:], keys[rest:], mark)
            return chunk[:ran] + done, keys[:ran] + done_keys
        return self._run_ordered_checked(chunk, keys, mark)

    def _run_ordered_checked(self, chunk: list[Message], keys: list[int], mark: int) -> tuple[list[Message], list[int]]:
        """`_run_ordered` with every check before each message."""
        core, handler, done, done_keys, gate = self._core, self._handler, [], [], self._core.gate
        assert gate is not None
        breaker, held = core.breaker, core.leases.held
        for msg, key in zip(chunk, keys, strict=True):
            if self.draining:
                self._give_back([msg])
                continue
            if mark == gate.revocations and breaker.state is BreakerState.CLOSED:
                startable = key in held  # `may_start_marked` while nothing changed, inlined (it runs per message)
            else:
                startable = core.may_start_marked(msg, mark)
            if not startable:
                self.submit(gate.skipped(msg, now_ms()))
                continue
            try:
                handler(msg)
            except Exception as e:  # noqa: BLE001  # any failure of the application's code is an outcome
                self._finish_ordered(msg, outcome_of(e, msg))
            else:
                done.append(msg)
                done_keys.append(key)
        return done, done_keys

    def _finish_ordered(self, msg: Message, outcome: Outcome) -> None:
        """Key or partition ordering: settle (or retry in place), then hand on the next message of its lane."""
        assert self._core.gate is not None
        settled, following = self._core.gate.finish(msg, outcome, now_ms())
        if settled is OK:
            self._acknowledge([msg])
        elif settled is not None:
            settle(self._client, msg, settled)
        if following:
            self.submit(following)

    def _give_back(self, messages: list[Message]) -> None:
        """Shutdown: messages that never started come back at once."""
        for msg in messages:
            if self._core.release(msg):
                settle(self._client, msg, RETRY_NOW)


class _Run:
    """A batch a handler thread runs itself (`HandlerThreads._run_batch`). `left` hands out its messages in order,
    to the run as each starts or all at once to a `take_over`; `finished`: how many the run settled (written under
    the core's lock, as are `taken`, `over` and `head`)."""

    def __init__(self, messages: list[Message], mark: int, lease: int) -> None:
        self.messages, self.mark = messages, mark
        self.lease = lease  # the run's lease (`WorkerCore.admit_run`): keys are needed only once it turned keyed
        self.keys: list[int] | None = None  # (`lease_keys`)
        self.left = iter(messages)
        self.chunk_at = time.perf_counter()
        self.finished = 0
        self.taken = self.over = False
        self.head: Message | None = None

    def pull(self, count: int) -> Iterator[Message]:
        return islice(self.left, count)

    def lease_keys(self) -> list[int]:
        """The messages' `lease_keys` (computed once, when first needed)."""
        if self.keys is None:
            self.keys = lease_keys(self.messages)
        return self.keys
