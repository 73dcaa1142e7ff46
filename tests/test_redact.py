"""What looks like a credential in a command line, redacted wherever nsyswrap shows the
command (nsyswrap/read/redact.py owns the rule; case 7), and what must stay as it is.

The end-to-end check with nsys 2022.4 (`nsyswrap run` of a program given a token and a
password) is tests/test_private.py; here a real nsys 2025.3 export (it keeps the command
line, META_DATA_CAPTURE) whose command gets secret arguments, copied into tmp_path."""

from __future__ import annotations

import re
import shutil
import sqlite3

import pytest
from conftest import GPU_MIX, sql

import nsyswrap
from nsyswrap.read.redact import REDACTED, looks_like_key, redact_args, redact_text, secret_name
from nsyswrap.render import FORMATS, render

HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # a token's shape, not a real one


@pytest.mark.parametrize("args, shown", [
    (["--hf-token=" + HF_TOKEN], ["--hf-token=" + REDACTED]),
    (["--password", "hunter2"], ["--password", REDACTED]),
    (["--api-key", "sk-123", "--x"], ["--api-key", REDACTED, "--x"]),
    (["-password=hunter2"], ["-password=" + REDACTED]),
    (["--apiKey", "abc"], ["--apiKey", REDACTED]),
    (["env", "HF_TOKEN=abc", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCY"],
     ["env", "HF_TOKEN=" + REDACTED, "AWS_SECRET_ACCESS_KEY=" + REDACTED]),
    (["--db", "postgres://bob:s3cret@db.example.com:5432/x"],
     ["--db", f"postgres://bob:{REDACTED}@db.example.com:5432/x"]),
    (["https://example.com/x?token=abc&page=2"], [f"https://example.com/x?token={REDACTED}&page=2"]),
    (["-H", "Authorization: Bearer abc"], ["-H", f"Authorization: Bearer {REDACTED}"]),
    (["--model-id", HF_TOKEN], ["--model-id", REDACTED]),  # a key by its look alone
    (["3f2a9c1b2d4e5f60718293a4b5c6d7e8"], [REDACTED]),  # 32 hex digits
    (["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig"], [REDACTED]),  # a web token
    (["sh", "-c", "HF_TOKEN=abc python x.py"], ["sh", "-c", f"HF_TOKEN={REDACTED} python x.py"]),
])
def test_credentials_are_redacted(args, shown):
    redacted = redact_args(args)
    assert redacted.args == shown
    assert redacted.what and redacted.note() and REDACTED in redacted.note()
    assert redact_args(redacted.args).args == shown  # redacting twice changes nothing


@pytest.mark.parametrize("args", [
    ["--tokens", "128"], ["--max-tokens", "64"], ["--key-dim", "64"], ["--num-keys", "8"],
    ["--password-stdin"], ["--secret-file", "/run/secrets/db"],
    ["TOKENIZERS_PARALLELISM=false", "PYTHONPATH=/opt/x"],
    ["--batch-size", "4096", "--lr", "3e-4", "--size", "2GiB"],
    ["--run-name", "llama3_8b_lr3e-4_bs512_seq2048_run17"],  # words, not a key
    ["--seed", "123456789012345678901234567890123456"],  # a number
    ["--model", "/data/models/3f2a9c1b2d4e5f60718293a4b5c6d7e8/model.pt"],  # a path
    ["runs/3f2a9c1b2d4e5f60718293a4b5c6d7e8", "cache_3f2a9c1b2d4e5f60718293a4b5c6d7e8.sqlite"],
    ["--id", "123e4567-e89b-12d3-a456-426614174000"],  # a UUID
    ["train.py", "--epochs", "3", "fast", "mode", "https://example.com/data.tar"],
    ["--token-limit", "100", "--keyboard", "us"],
])
def test_ordinary_arguments_stay(args):
    redacted = redact_args(args)
    assert redacted.args == args and redacted.what == [] and redacted.note() is None


def test_the_rule_in_its_parts():
    assert secret_name("--hf-token") and secret_name("HF_TOKEN") and secret_name("apiKey")
    assert not secret_name("--tokens") and not secret_name("--key-dim")
    assert looks_like_key(HF_TOKEN) and not looks_like_key("a" * 40)
    assert redact_text(f"nsys profile python t.py --hf-token {HF_TOKEN} --tokens 128") == (
        f"nsys profile python t.py --hf-token {REDACTED} --tokens 128")


@pytest.fixture(scope="module")
def with_secrets(tmp_path_factory):
    """A real nsys 2025.3 export whose profiled command line gains a token, a password and
    ordinary arguments, as nsys keeps them (PROCESS_0:ARGUMENT_n)."""
    path = tmp_path_factory.mktemp("redact") / "secrets.sqlite"
    shutil.copy2(GPU_MIX, path)
    (last,), = sql(path, "SELECT max(CAST(substr(name, 20) AS INTEGER)) FROM META_DATA_CAPTURE "
                         "WHERE name LIKE 'PROCESS_0:ARGUMENT_%'")
    extra = [f"--hf-token={HF_TOKEN}", "--password", "hunter2", "--tokens", "128"]
    con = sqlite3.connect(path)
    with con:
        con.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
                        [(f"PROCESS_0:ARGUMENT_{last + 1 + i}", a) for i, a in enumerate(extra)])
    con.close()
    return path


def test_no_format_shows_a_secret_and_those_with_notes_say_so(with_secrets):
    c = nsyswrap.compare(with_secrets)
    assert c.info.command[-5:] == [f"--hf-token={REDACTED}", "--password", REDACTED,
                                   "--tokens", "128"]
    for fmt in FORMATS:
        sections = ["ranges", "kernels", "instances"] if fmt == "csv" else [None]
        for section in sections:
            text = render(c, fmt, **({"section": section} if section else {}))
            assert "hunter2" not in text and HF_TOKEN not in text, (fmt, section)
            if fmt in ("table", "json", "markdown", "html"):  # the formats with the notes
                plain = re.sub(r"\\(.)", r"\1", text) if fmt == "markdown" else text
                assert "[redacted] (--hf-token, --password)" in plain, fmt
    page = render(c, "html")
    assert f"--hf-token={REDACTED} --password {REDACTED} --tokens 128" in page  # its header
