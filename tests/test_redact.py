"""Credentials never reach what nsyswrap shows or writes (nsyswrap/redact.py): the rule on
its own, every format of `compare` on a report whose command line holds secrets, and a
real `nsyswrap run` of a script given them (nsys 2022.4 on the CPU), whose files are its
owner's alone."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import USER_SEED, needs_nsys, sql

from nsyswrap.redact import REDACTED, redact_args, redact_text

HF_TOKEN = "hf_q7Wb2mXk9PzR4tLs8VdN3yFc6HjA1eUo"
PASSWORD = "hunter2"
API_KEY = "sk-9fJ2kL7mQ4xZ8pR3tV6wB1nC5yH0dG2a"


@pytest.mark.parametrize("args, shown", [
    (["train.py", f"--hf-token={HF_TOKEN}"], ["train.py", f"--hf-token={REDACTED}"]),
    (["train.py", "--password", PASSWORD], ["train.py", "--password", REDACTED]),
    (["train.py", "--api-key", API_KEY], ["train.py", "--api-key", REDACTED]),
    ([f"HF_TOKEN={HF_TOKEN}", "python"], [f"HF_TOKEN={REDACTED}", "python"]),
    (["--db", "postgres://me:s3cret@db.local/x"], ["--db", f"postgres://me:{REDACTED}@db.local/x"]),
    (["--url", f"https://h/x?token={PASSWORD}&n=1"], ["--url", f"https://h/x?token={REDACTED}&n=1"]),
    ([API_KEY], [REDACTED]),
])
def test_credentials_are_redacted(args, shown):
    redacted = redact_args(args)
    assert redacted.args == shown
    assert REDACTED in redacted.note()


@pytest.mark.parametrize("args", [
    ["train.py", "--tokens", "128", "--max-tokens", "64", "--key-dim", "64"],
    ["--password-stdin", "--config", "/home/me/runs/llama3_8b_lr3e-4_bs512_run17/config.yaml"],
    ["--data", "/datasets/imagenet/train/n01440764/n01440764_10026.JPEG", "--batch", "4096"],
    ["TOKENIZERS_PARALLELISM=false", "--seed", "12345678901234567890123456789012345"],
    ["--checkpoint", "model_checkpoint_epoch_0042_step_0001000000.pt"],
])
def test_what_is_not_a_credential_stays(args):
    redacted = redact_args(args)
    assert redacted.args == args and redacted.note() is None


def test_messages_are_redacted_as_command_lines():
    assert redact_text(f"profiling: python train.py --hf-token {HF_TOKEN} --epochs 3") == (
        f"profiling: python train.py --hf-token {REDACTED} --epochs 3")


def _with_secret_arguments(tmp_path: Path) -> Path:
    """The seed report, its profiled command line given secrets (as nsys 2025 keeps it, in
    META_DATA_CAPTURE)."""
    report = tmp_path / "seed.sqlite"
    shutil.copy2(USER_SEED, report)
    con = sqlite3.connect(report)
    with con:
        con.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)", [
            ("PROCESS_0:ARGUMENT_2", f"--hf-token={HF_TOKEN}"),
            ("PROCESS_0:ARGUMENT_3", "--password"), ("PROCESS_0:ARGUMENT_4", PASSWORD),
            ("PROCESS_0:ARGUMENT_5", "--tokens"), ("PROCESS_0:ARGUMENT_6", "128")])
    con.close()
    return report


def test_no_format_of_compare_shows_a_secret_of_the_command_line(tmp_path):
    report = _with_secret_arguments(tmp_path)
    assert sql(report, "SELECT count(*) FROM META_DATA_CAPTURE WHERE value = ?",
               (PASSWORD,)) == [(1,)]
    for fmt in ("table", "json", "csv", "markdown", "html", "trace"):
        out = tmp_path / f"out.{fmt}"
        proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(report),
                               "--format", fmt, "-o", str(out)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        text = out.read_text(encoding="utf-8") + proc.stdout + proc.stderr
        assert HF_TOKEN not in text and PASSWORD not in text, fmt
    doc = json.loads((tmp_path / "out.json").read_text())
    assert any(REDACTED in n and "--hf-token" in n for n in doc["report"]["notes"])
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert f"--hf-token={REDACTED} --password {REDACTED} --tokens 128" in page


SECRET_SCRIPT = """
import os, sys
print("args", len(sys.argv))
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "made.txt"), "w") as f:
    f.write("the program's own file")
"""


@pytest.mark.nsys
@needs_nsys
def test_a_run_given_secrets_shows_none_and_keeps_its_files_private(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SECRET_SCRIPT)
    out = tmp_path / "runs" / "one"
    env = {**os.environ, "MY_API_TOKEN": API_KEY}
    proc = subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$@"', "sh", sys.executable, "-m", "nsyswrap", "run",
         "-o", str(out), str(script), f"--hf-token={HF_TOKEN}", "--password", PASSWORD,
         "--tokens", "128"], capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "args 6" in proc.stdout  # the program got its arguments as given
    shown = proc.stdout + proc.stderr
    for f in sorted(out.iterdir()):
        if f.suffix in (".json", ".html", ".log"):
            shown += f.read_text(encoding="utf-8")
    for secret in (HF_TOKEN, PASSWORD, API_KEY):
        assert secret not in shown
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"--hf-token={REDACTED} --password {REDACTED} --tokens 128" in page
    doc = json.loads((out / "analysis.json").read_text())
    assert any(REDACTED in n and "--password" in n for n in doc["report"]["notes"])
    # nsys itself keeps the environment it saw in the export (NUL-separated, in
    # TARGET_INFO_SYSTEM_ENV and the processes' strings) and in the .nsys-rep: what the
    # README warns of.
    kept = f"MY_API_TOKEN={API_KEY}".encode()
    for table in ("TARGET_INFO_SYSTEM_ENV", "StringIds"):
        assert sql(out / "train.sqlite", f"SELECT count(*) > 0 FROM {table} WHERE "
                                         "instr(CAST(value AS BLOB), ?)", (kept,)) == [(1,)]
    assert kept in (out / "train.nsys-rep").read_bytes()
    # Everything the run made is its owner's alone; the program's own file is as the
    # user's umask makes it.
    for path in [out, *out.iterdir()]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert stat.S_IMODE((tmp_path / "made.txt").stat().st_mode) == 0o644
