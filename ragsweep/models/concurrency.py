"""How many requests to keep in flight at one model endpoint, adapted to what it shows.

A server answers a few requests at a time (llama.cpp and Ollama one by default) and queues
the rest; sending more than it serves only lengthens its queue. ``Limit`` starts at the
asked concurrency, capped by the slots the server says it has, halves when the endpoint
shows a queue (a first token that came later than the fastest one, for its prompt's
length, by more than an answer takes to generate, and by ``NOISE_S`` at least), refuses
(429, 503) or times out, at most once per round of requests (the requests sent since the
last decrease), and grows back by one after as many answers as it allows without such a
sign (additive increase, multiplicative decrease).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import asynccontextmanager

NOISE_S = 0.5  # a first token this much late is the jitter of a busy machine, not a queue


class Limit:
    """The requests one endpoint may have in flight (``value``) and why it changed."""

    def __init__(self, asked: int) -> None:
        self.asked = asked
        self.slots: int | None = None  # as the server says (llama.cpp's /props)
        self.value = asked
        self.round = 0  # decreases so far: a request remembers the round it was sent in
        self.lowered: Counter[str] = Counter()  # why, how often
        self.raised = 0
        self.sent = 0  # requests sent, retries included
        self._answered = 0  # answers since the last change
        self._fastest: float | None = None  # the fastest first token: seconds per prompt token
        self._generating: float | None = None  # mean seconds from first token to last
        self._in_flight = 0
        self._free: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # each run has its own

    @property
    def ceiling(self) -> int:
        return min(self.asked, self.slots) if self.slots else self.asked

    def cap(self, slots: int | None) -> None:
        """Never more in flight than the server's ``slots`` (None: it did not say)."""
        self.slots = slots
        self.value = min(self.value, self.ceiling)

    @asynccontextmanager
    async def slot(self):
        """Wait until fewer than ``value`` requests are in flight, then hold one place."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._free, self._loop = asyncio.Condition(), loop
        async with self._free:
            await self._free.wait_for(lambda: self._in_flight < self.value)
            self._in_flight += 1
        try:
            yield
        finally:
            async with self._free:
                self._in_flight -= 1
                self._free.notify_all()  # a raised limit is seen here too

    def answered(
        self,
        sent_in: int,
        first_token_s: float | None,
        rest_s: float | None,
        prompt_tokens: int | None = None,
    ) -> None:
        """An answer to a request sent in round ``sent_in``: ``first_token_s`` after it was
        sent came its first token, ``rest_s`` later its last (None: not streamed); its
        prompt had ``prompt_tokens`` (a longer prompt takes longer to its first token)."""
        if first_token_s is not None and rest_s is not None:
            size = max(prompt_tokens or 1, 1)
            fastest, generating = self._fastest, self._generating
            rate = first_token_s / size
            self._fastest = rate if fastest is None else min(fastest, rate)
            self._generating = rest_s if generating is None else (generating + rest_s) / 2
            if fastest is not None and first_token_s > fastest * size + max(generating, NOISE_S):
                self.lower(sent_in, "queue")
                return
        self._answered += 1
        if self._answered >= self.value and self.value < self.ceiling:
            self.value += 1
            self.raised += 1
            self._answered = 0

    def lower(self, sent_in: int, reason: str) -> None:
        """Halve ``value`` (not below 1) for a sign of overload in a request sent in round
        ``sent_in``; the other requests of that round were sent at the same limit, so their
        signs tell nothing more (nor does one at a single request in flight)."""
        if sent_in != self.round or self.value == 1:
            return
        self.round += 1
        self.value = max(1, self.value // 2)
        self.lowered[reason] += 1
        self._answered = 0

    def summary(self) -> str:
        """One line: what it settled on, and why."""
        slots = f"the server has {self.slots} slot(s)" if self.slots else "no slot count"
        why = ", ".join(f"{reason} x{n}" for reason, n in sorted(self.lowered.items()))
        changes = f"lowered on {why}; raised {self.raised} time(s)" if why else "never lowered"
        return f"{self.value} in flight (asked {self.asked}; {slots}; {changes})"
