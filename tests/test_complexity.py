"""No function of the package above a cyclomatic complexity of MAX_COMPLEXITY, as radon counts
it (`radon cc -s -n D nsyswrap --exclude "nsyswrap/render/vendor/*"` lists the closest):
a function past it holds several decisions that want names of their own. radon rather than
ruff's C901 (mccabe's count): radon counts each `and`/`or`, conditional expression and
comprehension as a branch, mccabe none of them, so the two disagree most on the functions
this guards against (render/grid.py's layout search was 66 under radon, 21 under C901), and
no one max-complexity of C901 stands for radon's 30."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

import nsyswrap

MAX_COMPLEXITY = 30
PACKAGE = Path(nsyswrap.__file__).parent
VENDORED = PACKAGE / "render" / "vendor"  # third-party code, inlined into the HTML page


def _blocks(block):
    """`block` and every function inside it (a class's methods, a function's closures,
    which radon counts apart from the function that holds them)."""
    yield block
    inner = block.methods if isinstance(block, Class) else block.closures
    for b in inner:
        yield from _blocks(b)


def complexities() -> dict[str, int]:
    """Each function, method, closure and class of the package ('path:line name') with
    its complexity (a class's is radon's: its methods' average, plus one)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if VENDORED in path.parents:
            continue
        for top in cc_visit(path.read_text(encoding="utf-8")):
            for b in _blocks(top):
                name = b.fullname if isinstance(b, Function) else b.name
                out[f"{path.relative_to(PACKAGE.parent)}:{b.lineno} {name}"] = b.complexity
    return out


def test_no_function_above_the_limit():
    found = complexities()
    assert len(found) > 500  # the whole package was read
    over = {k: v for k, v in found.items() if v > MAX_COMPLEXITY}
    assert not over, (f"above a cyclomatic complexity of {MAX_COMPLEXITY} (radon): {over}; "
                      "split them into named steps")


def test_the_count_is_radons(tmp_path):
    """The guard counts as `radon cc` does: a closure apart from its function, each branch
    and each boolean operator one."""
    source = ("def f(a, b):\n"
              "    def inner(x):\n"
              "        return 1 if x else 2\n"
              "    if a and b:\n"
              "        return 1\n"
              "    return 2\n")
    (f,) = cc_visit(source)
    assert f.complexity == 3  # 1, the if, the `and`
    assert [b.complexity for b in _blocks(f)] == [3, 2]
