"""The HTML pages escape by default (render/markup.py): every value put into the markup is
escaped unless it is markup itself, and markup is made only from the source's own string
literals, but for the few values listed here that are markup by their making. So no field of
a report can reach a page unescaped by a forgotten call: the hostile-name probes of
test_html.py and test_html_multi.py check the pages themselves."""

from __future__ import annotations

import ast
import html
from pathlib import Path

import pytest

import nsyswrap
from nsyswrap.render.markup import Html
from nsyswrap.render.page import HtmlPage

RENDER = Path(nsyswrap.__file__).parent / "render"

# Html(...) of something other than a string literal: (module, function) -> why it is
# markup already. Anything else is a test failure: a report's field must go into a
# template's `{}`, not around the escaping.
MARKUP_BY_MAKING = {
    ("page.py", "json_for_script"): "the specs' JSON, its own escapes keep it inside the "
                                    "script element (HTML's would be read as its text)",
    ("page.py", "vendor_scripts"): "the vendored Vega bundles, code inlined as it is",
    ("html.py", "notebook_html"): "the whole page as the iframe's srcdoc, escaped whole with "
                                  "html.escape (a field's escape would cap it)",
}


def _calls_of_markup(path: Path):
    """Each call of Html or Markup in `path`: (the function it is in, the call)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for fn in [tree, *(n for n in ast.walk(tree)
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        for node in (n for stmt in fn.body for n in _walk_outside_functions(stmt)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("Html", "Markup")):
                yield getattr(fn, "name", "<module>"), node


def _walk_outside_functions(node):
    """ast.walk, not into function definitions (each is visited as its own)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _walk_outside_functions(child)


def test_markup_is_made_only_of_literals_but_where_listed():
    found, exempt = [], set()
    for path in sorted(RENDER.rglob("*.py")):
        if path.name == "markup.py":
            continue
        for function, call in _calls_of_markup(path):
            literal = (len(call.args) <= 1 and not call.keywords and all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args))
            if literal:
                continue
            key = (path.name, function)
            if key in MARKUP_BY_MAKING and call.func.id == "Html":
                exempt.add(key)
            else:
                found.append(f"{path.relative_to(RENDER.parent)}:{call.lineno} in {function}: "
                             f"{ast.unparse(call)[:80]}")
    assert not found, ("markup made of a value (put it into a template's {} instead, "
                       f"which escapes it): {found}")
    assert exempt == set(MARKUP_BY_MAKING)  # each listed place still exists


def test_the_html_modules_build_no_markup_by_hand():
    """No f-string of the render modules writes a tag: a tag written so holds its values
    unescaped (and could reach a page only through Html(value), which the test above
    refuses; this names the place sooner)."""
    found = []
    for path in sorted(RENDER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values
                               if isinstance(v, ast.Constant) and isinstance(v.value, str))
                if "<" in text and ">" in text and any(
                        f"<{t}" in text or f"</{t}" in text for t in _TAGS):
                    found.append(f"{path.relative_to(RENDER.parent)}:{node.lineno}")
    assert not found, f"HTML built in f-strings: {found}"


_TAGS = ("a ", "a>", "p>", "p ", "td", "th", "tr", "div", "span", "li", "ul", "h1", "h2", "h3",
         "section", "table", "code", "script", "style", "details", "article", "iframe",
         "header", "footer", "nav", "dl", "dt", "dd", "input", "meta", "html", "body")


@pytest.mark.parametrize("build", [
    lambda v: Html("<td>{}</td>").format(v),
    lambda v: Html("<td title=\"{t}\">x</td>").format(t=v),
    lambda v: Html("<p>") + v,
    lambda v: v + Html("</p>"),
    lambda v: Html(", ").join([v, v]),
    lambda v: Html("<td>{}</td>").format(Html("<b>{}</b>").format(v)),
], ids=["format", "format-keyword", "add", "radd", "join", "nested"])
def test_every_way_of_building_escapes_a_plain_value(build):
    hostile = "</script><img src=x onerror='alert(1)'>\"&\x1b"
    out = str(build(hostile))
    assert "<img" not in out and "</script>" not in out and "'" not in out
    # As every format shows a report's text: the escapes of html.escape, control
    # characters as escapes.
    assert html.escape("</script><img src=x onerror='alert(1)'>\"&\\x1b", quote=True) in out


def test_markup_stays_markup_and_none_is_nothing():
    cell = Html("<b>{}</b>").format("x<y")
    assert Html("<td>{}</td>").format(cell) == "<td><b>x&lt;y</b></td>"  # not escaped twice
    assert Html("<td>{}</td>").format(None) == "<td></td>"
    assert Html("<td>{:,}</td>").format(1234567) == "<td>1,234,567</td>"
    assert Html("").join(["a", cell]) == "a<b>x&lt;y</b>"


def test_a_forgotten_mark_shows_as_text_not_markup():
    """A section written as a plain string instead of Html: the page shows its tags as
    text (visible, and harmless), it does not run them."""
    page = HtmlPage().document("t", [Html("<p>ok</p>"), "<img src=x onerror=alert(1)>"])
    main = page[page.index("<main>"):page.index("</main>")]
    assert main == "<main><p>ok</p>&lt;img src=x onerror=alert(1)&gt;"


def test_the_escape_is_every_formats_one():
    """Each character, and a text past the cap, escaped as names.printable then
    html.escape(quote=True) write them (the pages' bytes before Html)."""
    from nsyswrap.common.names import SHOWN_LIMIT, printable

    texts = [chr(c) for c in [*range(0x3000), *range(0xFE00, 0x10000), 0x1F600, 0x10FFFF]]
    texts += ["a" * SHOWN_LIMIT, "a" * (SHOWN_LIMIT + 1), "é" * (SHOWN_LIMIT + 5) + "<"]
    for text in texts:
        want = html.escape(printable(text), quote=True)
        assert Html.escape(text) == want
        assert Html("{}").format(text) == want


def test_a_spec_formats_then_escapes_and_conversions_are_refused():
    assert Html("<td>{:>5}</td>").format("<") == "<td>    &lt;</td>"
    assert Html("<td>{n:.1%}</td>").format(n=0.5) == "<td>50.0%</td>"
    assert Html("<td>{n}</td>").format_map({"n": "<"}) == "<td>&lt;</td>"
    for template in ("{!r}", "{0.name}", "{0[1]}", "{:{w}}"):
        with pytest.raises(ValueError):
            Html(template).format("x", w=3)
