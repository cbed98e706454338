"""The cells run in this kernel, for Jupyter's history requests (a console's up-arrow and
search). Kept in memory: one session per kernel process, numbered 1 as IPython numbers its
first."""
from __future__ import annotations

from fnmatch import fnmatch

SESSION = 1


class History:
    def __init__(self):
        self.entries: list[tuple[int, str, str | None]] = []  # (line, input, output text)

    def add(self, line: int, code: str, output: str | None) -> None:
        self.entries.append((line, code, output))

    def _rows(self, entries, output: bool) -> list[tuple]:
        return [(SESSION, line, (code, result) if output else code)
                for line, code, result in entries]

    def tail(self, n: int | None, output: bool) -> list[tuple]:
        return self._rows(self.entries[-n:] if n else self.entries, output)

    def range(self, session: int | None, start: int, stop: int | None, output: bool) -> list[tuple]:
        if session not in (None, 0, SESSION):  # 0 means this session, as in IPython
            return []
        return self._rows([e for e in self.entries
                           if e[0] >= start and (stop is None or e[0] < stop)], output)

    def search(self, pattern: str, unique: bool, n: int | None, output: bool) -> list[tuple]:
        found = [e for e in self.entries if fnmatch(e[1], pattern or "*")]
        if unique:  # the latest run of each distinct input
            latest = {code: (line, code, result) for line, code, result in found}
            found = sorted(latest.values())
        return self._rows(found[-n:] if n else found, output)
