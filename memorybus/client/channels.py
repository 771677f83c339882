"""The shards' direct channels as one client sees them (see :mod:`memorybus.actors.direct`).

Each shard actor is asked once where its channel is; a channel is used only by a
process on the actor's node. The answer is kept per actor handle and asked again
when the channel broke (the actor restarted: a new process, a new address) or the
handle was replaced. A shard that cannot answer is asked again on the next recall
and, meanwhile, called through Ray.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memorybus.actors import direct
from memorybus.actors.runtime import Op, Settled, node_id

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


def channels(bus: BusHandle, shards: Sequence[int]) -> Op[list[direct.Channel | None]]:
    """The direct channel of each of ``shards`` (None: call it through Ray)."""
    if not bus.config.direct_reads or not direct.supported():
        return [None] * len(shards)
    handles = bus._shard_handles()
    known = bus._channels
    missing = [i for i in shards if not _current(known.get(i), handles[i])]
    if missing:
        answers = yield Settled([handles[i].direct_channel.remote(bus._credential or "") for i in missing])
        here = node_id()
        for i, info in zip(missing, answers, strict=True):
            if isinstance(info, BaseException):
                continue  # asked again next time; the Ray call reports what is wrong
            usable = isinstance(info, direct.ChannelInfo) and info.node_id == here
            old = known.get(i)
            known[i] = (handles[i], direct.Channel(info.address, bus._credential or "") if usable else None)
            if old is not None and old[1] is not None:
                old[1].close()
    return [known[i][1] if i in known else None for i in shards]


def _current(entry: tuple[Any, direct.Channel | None] | None, handle: Any) -> bool:
    if entry is None or entry[0] is not handle:
        return False
    return entry[1] is None or not entry[1].broken


def close_all(bus: BusHandle) -> None:
    """Close the connections a closed handle keeps."""
    known, bus._channels = bus._channels, {}
    for _, channel in known.values():
        if channel is not None:
            channel.close()
