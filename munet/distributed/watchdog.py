"""Which ranks did not arrive: the census a collective on MPI takes when it times out.

Every rank of an MPI job holds one :class:`Watchdog` over its own duplicate of ``COMM_WORLD``
(global ranks). While a rank waits for a collective (``Work.wait``), it records what it waits in
(the group's ranks, the collective's number in that group, its description) and, once the wait
is past the transport's spin, answers the census probes that arrive (``answer``, from the
transport's polling loop: no thread, nothing on the fast path). A rank whose wait times out asks
every other member of the group (``census``) and names those that did not answer from the same
collective: a rank waiting in another collective says which; a rank that does not answer within
the census window is not waiting in any collective at all (still computing, stuck, or dead).

Messages are fixed-size byte records (no pickle): a probe is one int64 (the census number), an
answer the census number it replies to, whether the rank waits, the group's key (a CRC of its
ranks), the collective's number and 80 bytes of its description.
"""

from __future__ import annotations

import time
import zlib

import numpy as np

PROBE, ANSWER = 0x4D55, 0x4D56  # tags on the watchdog's own communicator
_TEXT = 80
_HEAD = 4  # int64s before the description: census number, waiting, group key, collective number
CENSUS_SECONDS = 2.0  # how long a timed-out rank waits for the answers


def group_key(ranks) -> int:
    return zlib.crc32(np.asarray(list(ranks), dtype=np.int64).tobytes())


class Watchdog:
    """This rank's side of the census (see the module docstring); ``comm`` is an mpi4py communicator."""

    def __init__(self, comm):
        self.comm = comm
        self.waiting = None  # (group key, collective number, description) while a wait runs
        self._census = 0

    def free(self) -> None:
        from munet.distributed.mpi_comm import mpi

        if self.comm != mpi().COMM_NULL:
            self.comm.Free()

    def _record(self, census: int) -> np.ndarray:
        record = np.zeros(_HEAD * 8 + _TEXT, dtype=np.uint8)
        head = record[: _HEAD * 8].view(np.int64)
        head[0] = census
        if self.waiting is not None:
            key, number, description = self.waiting
            head[1:] = (1, key, number)
            text = description.encode()[:_TEXT]
            record[_HEAD * 8 : _HEAD * 8 + len(text)] = np.frombuffer(text, dtype=np.uint8)
        return record

    def answer(self) -> None:
        """Answer every census probe that has arrived (called while this rank waits)."""
        from munet.distributed.mpi_comm import mpi

        status = mpi().Status()
        try:
            while self.comm.Iprobe(mpi().ANY_SOURCE, PROBE, status):
                probe = np.empty(1, dtype=np.int64)
                self.comm.Recv(probe, status.Get_source(), PROBE)
                self.comm.Send(self._record(int(probe[0])), status.Get_source(), ANSWER)
        except mpi().Exception:
            # a peer died (MPI's fault tolerance): acknowledge it so that probes from the living go on;
            # the collective being waited for reports the death itself (MpiRequest.test)
            self.comm.Ack_failed()

    def census(self, ranks: list, me: int, number: int, seconds: float = CENSUS_SECONDS) -> str:
        """Why collective ``number`` of group ``ranks`` timed out on rank ``me``: the ranks that did
        not arrive, and what each is doing, as one sentence."""
        from munet.distributed.mpi_comm import mpi

        self._census += 1
        key = group_key(ranks)
        others = [r for r in ranks if r != me]
        probe = np.asarray([self._census], dtype=np.int64)
        sends = [self.comm.Isend(probe, r, PROBE) for r in others]
        answers = {r: np.empty(_HEAD * 8 + _TEXT, dtype=np.uint8) for r in others}
        receives = {r: self.comm.Irecv(answers[r], r, ANSWER) for r in others}
        heard: dict = {}
        deadline = time.monotonic() + seconds
        while receives and time.monotonic() < deadline:
            for r in list(receives):
                if receives[r].Test():
                    del receives[r]
                    head = answers[r][: _HEAD * 8].view(np.int64)
                    if head[0] == self._census:
                        heard[r] = (bool(head[1]), int(head[2]), int(head[3]), _text(answers[r]))
            self.answer()
            time.sleep(0.001)
        for request in receives.values():  # the ranks that did not answer
            request.Cancel()
        mpi().Request.Waitall(list(receives.values()))
        for request in sends:  # an 8-byte probe is sent eagerly; nobody need receive it
            request.Free()
        missing = []
        for r in others:
            if r not in heard:
                missing.append(f"rank {r} (not waiting in any collective: still computing, stuck or dead)")
                continue
            waits, their_key, their_number, text = heard[r]
            if not waits:
                missing.append(f"rank {r} (not waiting in any collective)")
            elif their_key != key or their_number != number:
                missing.append(f"rank {r} (waiting in {text}, collective #{their_number} of its group)")
        if not missing:
            return "every rank of the group has arrived; the transport is stuck"
        return "did not arrive: " + "; ".join(missing)


def _text(record: np.ndarray) -> str:
    return bytes(record[_HEAD * 8 :]).rstrip(b"\0").decode(errors="replace")
