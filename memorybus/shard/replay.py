"""The shard's event log, read: pages of the events a context may see, per scope, in
commit order (subscriptions replay from here), and the latest sequence of each scope."""

from __future__ import annotations

from memorybus.errors import InvalidRequest
from memorybus.memory.events import Event, EventFilter, deliverable
from memorybus.scopes import Context
from memorybus.shard.job import Job
from memorybus.validation import is_int


class Replay(Job):
    def read_events(
        self, context: Context, cursors: dict[str, int], flt: EventFilter | None = None, limit: int = 1000
    ) -> tuple[list[Event], dict[str, int]]:
        """One page of :meth:`read_events_page`, without the "more" flag."""
        events, new_cursors, _ = self.read_events_page(context, cursors, flt, limit)
        return events, new_cursors

    def read_events_page(
        self, context: Context, cursors: dict[str, int], flt: EventFilter | None = None, limit: int = 1000
    ) -> tuple[list[Event], dict[str, int], bool]:
        """Events after ``cursors[scope_key]`` for every scope that ``context`` may see,
        in per-scope order, keeping only those it could recall and ``flt`` selects.

        Reads at most ``limit`` log entries in all (a page: replay from the start of a
        long log never loads it at once). Returns the events, the new cursors (advanced
        past events filtered out; scopes not reached keep theirs) and whether more
        entries may follow.
        """
        context = self.core.check_context(context)
        if not is_int(limit, 1):
            raise InvalidRequest("limit", "must be a positive int")
        flt = flt or EventFilter()
        out: list[Event] = []
        new_cursors: dict[str, int] = {}
        left = limit
        more = False
        for scope in context.visible_scopes():
            if left <= 0:
                more = True
                break
            after = int(cursors.get(scope.key, 0))
            rows = self.core.store.read_events(scope.key, after, left)
            for seq, blob in rows:
                ev = Event.decode(blob, seq)
                if deliverable(ev, context, flt):
                    out.append(ev)
                after = seq
            new_cursors[scope.key] = after
            left -= len(rows)
            more = more or left <= 0
        self.core.store.confirm_reads()  # no cursor moves past a write a failover could take back
        return out, new_cursors, more

    def last_seqs(self, context: Context) -> dict[str, int]:
        context = self.core.check_context(context)
        seqs = {s.key: self.core.store.last_seq(s.key) for s in context.visible_scopes()}
        self.core.store.confirm_reads()  # a new subscription starts after writes that survive a failover
        return seqs
