"""`nsyswrap run` of a program given a token and a password, for real with Debian's nsys 2022.4
(case 7): what it prints, logs and writes shows neither (redacted, and said so), the
capture keeps them and the environment (the tables named here), and everything it creates is
its owner's alone: folders 0700, files 0600, the raw capture nsys makes 0664 included. The
program itself keeps the user's umask (nsys 2022.4 runs it with 000)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_nsys, once_more_if_nsys_failed, sql

import nsyswrap
from nsyswrap.capture.profile import find_importer
from nsyswrap.render import FORMATS, render

pytestmark = [pytest.mark.nsys, needs_nsys]
HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # a token's shape, not a real one
PASSWORD = "hunter2"
ENV_SECRET = "env-secret-Zq8Xw3"  # in a variable of the environment nsyswrap runs in
SECRETS = (HF_TOKEN, PASSWORD, ENV_SECRET)
PROGRAM = """\
import os, sys, time
import nsyswrap
with nsyswrap.annotate("step"):
    time.sleep(0.01)
open(os.environ["PROGRAM_FILE"], "w").write("made by the program")
"""


def _nsyswrap(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=240,
                          preexec_fn=lambda: os.umask(0o022))  # the usual umask


@pytest.fixture(scope="module")
def secret_run(tmp_path_factory):
    """One run; the importer (Debian's nsys cannot find it; nsyswrap runs it) behind a
    script that first writes down the mode of the raw capture nsys made."""
    folder = tmp_path_factory.mktemp("private")
    importer = find_importer("nsys")
    if importer is None:
        pytest.skip("no QdstrmImporter")
    spy = folder / "importer"
    spy.write_text(f'#!/bin/sh\nstat -c %a "$3" >> "{folder / "modes"}"\n'
                   f'exec "{importer}" "$@"\n')
    spy.chmod(0o755)
    script = folder / "secret_args.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "NSYSWRAP_IMPORTER": str(spy), "MY_API_TOKEN": ENV_SECRET,
           "PROGRAM_FILE": str(folder / "program.txt")}
    out = folder / "run"
    def once():
        (folder / "modes").unlink(missing_ok=True)  # the importer's, of this run only
        return _nsyswrap("run", "-o", out, "--trace", "nvtx", "--format", "markdown", script,
                         f"--hf-token={HF_TOKEN}", "--password", PASSWORD, "--tokens", "128",
                         "--key-dim", "64", env=env)

    proc = once_more_if_nsys_failed(once, out)
    assert proc.returncode == 0, proc.stderr
    return folder, out, proc


def test_a_run_shows_no_secret_and_says_it_was_redacted(secret_run):
    folder, out, proc = secret_run
    shown = {"stdout": proc.stdout, "stderr": proc.stderr,
             **{p.name: p.read_text(encoding="utf-8") for p in
                (out / "analysis.json", out / "report.html", out / "nsys.log")}}
    for where, text in shown.items():
        assert not any(s in text for s in SECRETS), where
    page = shown["report.html"]
    assert ("secret_args.py --hf-token=[redacted] --password [redacted] --tokens 128 "
            "--key-dim 64</dd>") in page  # the header's command line
    note = "[redacted] (--hf-token, --password)"
    assert note in page and note in re.sub(r"\\(.)", r"\1", proc.stdout)  # Markdown's
    assert any(note in n for n in json.loads(shown["analysis.json"])["report"]["notes"])
    assert "--hf-token=[redacted]' --password '[redacted]'" in shown["nsys.log"]  # nsys's
    assert "--password [redacted]" in proc.stderr  # 'profiling with nsys ...: COMMAND'


def test_the_capture_keeps_them_and_no_format_shows_them(secret_run):
    folder, out, _ = secret_run
    export = out / "secret_args.sqlite"
    # Where nsys 2022.4 keeps them: the environment nsys ran in, whole, its variables
    # separated by NUL (text functions and LIKE stop at the first: searched as bytes), in
    # TARGET_INFO_SYSTEM_ENV's DeviceEnvironment row, and its processes' environments in
    # StringIds; the command line only in the .nsys-rep (2025.3 keeps both in
    # META_DATA_CAPTURE, test_redact.py).
    holds = "instr(CAST({} AS BLOB), CAST(? AS BLOB)) > 0"
    secret = (f"MY_API_TOKEN={ENV_SECRET}",)
    assert sql(export, "SELECT name FROM TARGET_INFO_SYSTEM_ENV WHERE "
               + holds.format("value"), secret) == [("DeviceEnvironment",)]
    assert sql(export, "SELECT count(*) FROM StringIds WHERE " + holds.format("value"),
               secret)[0][0] >= 1
    rep = (out / "secret_args.nsys-rep").read_bytes()
    assert HF_TOKEN.encode() in rep and ENV_SECRET.encode() in rep
    c = nsyswrap.compare(export)
    for fmt in FORMATS:
        for section in (["ranges", "instances"] if fmt == "csv" else [None]):
            text = render(c, fmt, **({"section": section} if section else {}))
            assert not any(s in text for s in SECRETS), (fmt, section)


def _modes(folder: Path) -> dict[str, str]:
    """Each path under `folder` (and itself) as 'NAME': 'octal mode'."""
    out = {".": oct(stat.S_IMODE(folder.stat().st_mode))}
    for p in folder.rglob("*"):
        out[str(p.relative_to(folder))] = oct(stat.S_IMODE(p.lstat().st_mode))
    return out


def _private(modes: dict[str, str], folder: Path) -> None:
    for name, mode in modes.items():
        want = "0o700" if (folder / name).is_dir() else "0o600"
        assert mode == want, (name, mode)


def test_what_run_import_and_an_export_make_is_private(secret_run):
    folder, out, _ = secret_run
    modes = _modes(out)
    assert {"secret_args.nsys-rep", "secret_args.sqlite", "nsys.log", "analysis.json",
            "report.html"} <= set(modes)
    _private(modes, out)
    # The raw capture, 0664 as nsys made it, private before anything read it.
    assert (folder / "modes").read_text().split() == ["600"]
    imported = folder / "imported"
    proc = _nsyswrap("import", out / "secret_args.nsys-rep", "-o", imported)
    assert proc.returncode == 0, proc.stderr
    assert {"secret_args.sqlite", "analysis.json", "report.html"} <= set(_modes(imported))
    _private(_modes(imported), imported)
    # An export into the cache (compare of a .nsys-rep with no export beside it).
    alone = folder / "alone"
    alone.mkdir()
    shutil.copy(out / "secret_args.nsys-rep", alone)
    proc = _nsyswrap("compare", alone / "secret_args.nsys-rep", "--cache-dir",
                     folder / "cache" / "nsyswrap", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    cache = _modes(folder / "cache")
    assert any(name.endswith(".sqlite") for name in cache)
    _private(cache, folder / "cache")


def test_the_program_makes_its_files_with_the_users_umask(secret_run):
    folder, _, _ = secret_run
    # 0644 under umask 022: not 0600 (nsyswrap's own umask) nor 0666 (nsys 2022.4's 000).
    assert oct(stat.S_IMODE((folder / "program.txt").stat().st_mode)) == "0o644"
