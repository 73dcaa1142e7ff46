"""HTML escaped by default: every page of nsyswrap is built of `Html`, whose literal text is
markup and whose every value is escaped on the way in. No field of a report can reach a
page unescaped by a forgotten call: a forgotten `Html` around markup shows it as text on
the page, never as markup.

`Html` is markupsafe's `Markup` (the escaping core of Jinja2's autoescape), so
`Html("<td>{}</td>").format(name)`, `Html("<p>") + name` and `Html(", ").join(names)`
escape `name` and `names`, and leave what is `Html` already (a table built elsewhere, a
chart's element) as it is. `Html(text)` marks `text` as markup, unescaped: only string
literals are written so (tests/test_html_markup.py checks the source), but for the few
values that are markup by their making, each listed there with why.

Escaping is the one every format of nsyswrap shares: None as nothing, control characters
as escapes and a text capped (names.printable), then `html.escape` with quotes (`"` as
`&quot;`, `'` as `&#x27;`; markupsafe's own writes `&#34;` and `&#39;`, which would change
every page's bytes for nothing).
"""

from __future__ import annotations

import html
import re
import string
from typing import Any

from markupsafe import Markup

from ..common.names import CONTROL_CHARACTERS, SHOWN_LIMIT, printable

__all__ = ["Html"]


class Html(Markup):
    """Markup: its text is trusted, every value put into it (`format`, `+`, `join`) is
    escaped unless it is markup itself. A template's fields are positions or names, with
    or without a format spec (`{:,}`); no conversions (`!r`) or attributes (`{0.name}`)."""

    __slots__ = ()

    def __new__(cls, text: Any = "", encoding: str | None = None, errors: str = "strict"):
        if text.__class__ is str and encoding is None:  # a literal: the pages' most made
            return str.__new__(cls, text)
        return super().__new__(cls, text, encoding, errors)

    @classmethod
    def escape(cls, s: Any) -> Html:
        if isinstance(s, cls):
            return s
        if hasattr(s, "__html__"):
            return cls(s.__html__())
        return cls(_escaped(s))

    def format(self, *args: Any, **kwargs: Any) -> Html:
        # Each value escaped first, then str.format's own loop, in C. markupsafe's format
        # runs string.Formatter's loop, in Python: the kernel table's 2,000 rows took 2.7
        # times as long as with f-strings, against 1.2 times so (docs/html-report.md).
        specced = _SPECCED.get(self)
        if specced is None:
            specced = _specced(self)
        values = [_value(v, i in specced) for i, v in enumerate(args)] if specced else [
            _value(v, False) for v in args]
        if kwargs:
            return self.__class__(str.format(self, *values, **{
                k: _value(v, k in specced) for k, v in kwargs.items()}))
        return self.__class__(str.format(self, *values))

    def format_map(self, mapping: Any) -> Html:
        return self.format(**mapping)

    def join(self, iterable: Any) -> Html:
        return self.__class__(str.join(self, [
            x if x.__class__ is Html else self.escape(x) for x in iterable]))


def _value(value: Any, specced: bool) -> Any:
    """`value` as str.format may put it into markup: escaped, or formatted by its field's
    spec and then escaped (`specced`); markup as it is."""
    kind = value.__class__
    if kind is int or kind is float:
        return value  # their text holds nothing to escape (a spec is the source's own)
    if not specced:
        if kind is str:
            return _escaped(value)
        if kind is Html:
            return value
        if value is None:
            return ""
    return _Escaping(value)


class _Escaping:
    """A value whose field gives its formatted text escaped (markup: as it is)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __format__(self, spec: str) -> str:
        value = self.value
        if hasattr(value, "__html_format__"):
            return value.__html_format__(spec)
        if hasattr(value, "__html__"):
            if spec:
                raise ValueError(f"a format spec ({spec}) for markup")
            return value.__html__()
        return _escaped(format(value, spec) if spec else value)


def _escaped(value: Any) -> str:
    text = "" if value is None else value if value.__class__ is str else str(value)
    if len(text) <= SHOWN_LIMIT and _ESCAPED.search(text) is None:
        return text  # what the escapes below would give back unchanged, found at C speed
    return html.escape(printable(text), quote=True)


# A character that printable or html.escape would write otherwise.
_ESCAPED = re.compile(f"[&<>\"'{CONTROL_CHARACTERS}]")

# Each template's fields that carry a format spec, by position or name, read once: the
# pages format the same few templates thousands of times (a table's rows).
_SPECCED: dict[str, frozenset[int | str]] = {}


def _specced(template: str) -> frozenset[int | str]:
    """The fields of `template` with a format spec, read and kept in _SPECCED (Html.format
    looks there first); ValueError for a field Html.format does not take."""
    keys: set[int | str] = set()
    auto = 0
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if conversion or "{" in spec or not (name == "" or name.isdigit()
                                             or name.isidentifier()):
            raise ValueError(f"Html template field {name!r} (conversion {conversion!r}, "
                             f"spec {spec!r}): a position or a name, with a spec at most")
        key: int | str = auto if name == "" else int(name) if name.isdigit() else name
        auto += name == ""
        if spec:
            keys.add(key)
    found = frozenset(keys)
    if len(_SPECCED) < 4096:  # the source's templates, never a report's text; bounded anyway
        _SPECCED[str(template)] = found
    return found
