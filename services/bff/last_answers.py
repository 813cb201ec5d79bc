"""The process's last answer of each (user, source) (docs/protocol.md: A fleet, "The
order-source budget"): what stands in for a source call over the budget. Bounded in entries,
the least recently answered going first; a user's polls meet in one process (routing by user),
so its last answer is here."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from shared.upstream_wire import SourceResponse


@dataclass(frozen=True)
class LastAnswer:
    answer: SourceResponse
    # when the source gave it (unix ms): a kept answer's when it was kept
    at_ms: int


class LastAnswers:
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._answers: OrderedDict[tuple[str, str], LastAnswer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def remember(self, user_id: str, service: str, answer: SourceResponse, at_ms: int) -> None:
        if self.max_entries <= 0:
            return
        key = (user_id, service)
        held = self._answers.pop(key, None)
        if held is not None and held.at_ms > at_ms:
            # a kept answer read after a newer call: the newer one is the last answer
            answer, at_ms = held.answer, held.at_ms
        self._answers[key] = LastAnswer(answer, at_ms)
        while len(self._answers) > self.max_entries:
            self._answers.popitem(last=False)

    def get(self, user_id: str, service: str) -> LastAnswer | None:
        return self._answers.get((user_id, service))
