"""JSON that nobody vouches for: the marks the harness and `nsyswrap run`'s runner write into
a report (anything else may write marks of the same shape), and the analysis.json given to
`nsyswrap diff`. Parsed so that whatever the text holds fails as a ValueError, and checked
field by field before use: a reader says which field is not what nsyswrap writes there,
and the caller leaves that document out (a report's mark, with a note) or refuses the input
(BadInputError), never passes a value on that a later step cannot take (an integer past 64
bits, text where a number is). Long marks come in parts, joined here (MarkParts).

Built before pandas is imported: the standard library only."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def parse(text: str) -> Any:
    """`text` as JSON; ValueError where it is not JSON this process can hold. json raises
    ValueError for invalid text and for an integer of more than 4300 digits (Python's
    limit on int(str)), but RecursionError for arrays or objects nested past the
    interpreter's recursion limit (~1000 levels): that is said as a ValueError too."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def whole(value: Any, least: int = INT64_MIN, most: int = INT64_MAX) -> bool:
    """An integer (not a bool) in [least, most]: by default one int64 holds."""
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= most


def real(value: Any) -> bool:
    """A number float() takes and an int64 or float64 column holds: a float (NaN and the
    infinities included), or an integer within 64 bits (float(10 ** 400) overflows)."""
    return isinstance(value, float) or whole(value)


def finite(value: Any, least: float = -math.inf) -> bool:
    """A finite number, at least `least`."""
    return real(value) and math.isfinite(value) and value >= least


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def all_of(value: Any, check) -> bool:
    """A list whose every item passes `check`."""
    return isinstance(value, list) and all(check(v) for v in value)


@dataclass
class JoinedMark:
    """One long mark's parts (MarkParts), joined."""

    key: str
    found: int  # parts found
    count: int  # parts there are, as the first one found says
    complete: bool  # parts 0 to count - 1, each found
    doc: Any  # the JSON the parts' texts join into; None where incomplete or not JSON
    where: Any  # where the last part was found (MarkParts.add); None where incomplete


class MarkParts:
    """The parts of long JSON marks (instrument/mark_parts.py writes them), gathered by key
    in the order they come and joined: the one reading of the parts of the harness's marks
    and of the runner's."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[int, tuple[dict, Any]]] = {}

    def add(self, doc: dict, where: Any = None) -> bool:
        """Keep `doc`, a part, with `where` it was found (the caller's to read back); a
        second part of its key and number replaces the first. False, keeping nothing, where
        it lacks its key, part number, part count or text."""
        if not (is_text(doc.get("key")) and whole(doc.get("part"), 0)
                and whole(doc.get("parts"), 1) and is_text(doc.get("text"))):
            return False
        self._parts.setdefault(doc["key"], {})[doc["part"]] = (doc, where)
        return True

    def joined(self) -> Iterator[JoinedMark]:
        """Each key's parts, joined, in the order of the keys' first parts."""
        for key, pieces in self._parts.items():
            count = pieces[min(pieces)][0]["parts"]
            # The length first: a count that is not the number found never builds its range.
            if len(pieces) != count or set(pieces) != set(range(count)):
                yield JoinedMark(key, len(pieces), count, False, None, None)
                continue
            try:
                doc = parse("".join(pieces[i][0]["text"] for i in range(count)))
            except ValueError:
                doc = None
            yield JoinedMark(key, count, count, True, doc, pieces[count - 1][1])
