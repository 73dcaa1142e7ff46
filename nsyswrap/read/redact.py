"""What looks like a credential, and its redaction: the one rule for every text nsyswrap
shows or writes that quotes a command line (a report's header, its notes, nsys.log,
messages on standard error). Standard library only: the CLI's start-up imports it.

Redacted (the value becomes `[redacted]`, the name stays, so the reader sees what was
there):
- an option or variable whose name's last word is a credential's (token, key, secret,
  password, passwd, passphrase, credential(s), and compounds such as apikey, authtoken):
  `--hf-token=V`, `--api-key V` (two arguments), `-password=V`, `HF_TOKEN=V`,
  `AWS_SECRET_ACCESS_KEY=V`, `?token=V` in a URL. The last word only: `--tokens 128`,
  `--max-tokens 64`, `--key-dim 64`, `--password-stdin`, `TOKENIZERS_PARALLELISM=false`
  stay;
- a URL's password (`https://user:[redacted]@host/`);
- an `Authorization:` header's value (`Authorization: Bearer [redacted]`);
- a JSON web token (`eyJ...` in three dotted parts);
- a run of 32 or more letters, digits and `+/_-=` (hex, base64, base64url) with a piece of
  24 or more characters (between `-`, `_`, `/`, `+`) that mixes letters and digits: API
  keys (`hf_...`, `ghp_...`, `sk-...`), hex secrets (a git commit's hash reads alike and is
  redacted too). Not a path: a run with `/` counts only where it also has base64's `+` or
  trailing `=`, and a run touching a `.` (a file name's extension) not at all; not a number
  (it needs a letter) and not a name made of words (`llama3_8b_lr3e-4_bs512_run17`: no
  piece that long).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

REDACTED = "[redacted]"

# The last word of a name that holds a credential.
_SECRET_WORDS = frozenset({
    "token", "key", "secret", "password", "passwd", "passphrase", "credential",
    "credentials", "apikey", "accesskey", "secretkey", "privatekey", "authkey", "authtoken",
    "accesstoken", "refreshtoken", "clientsecret",
})
# A name's words: split at - _ . and where lower case meets upper case (apiKey).
_WORD_BREAK = re.compile(r"[-_.]+|(?<=[a-z0-9])(?=[A-Z])")
# An option alone (its value is the next argument): -x, --name.
_OPTION = re.compile(r"--?([A-Za-z][A-Za-z0-9_.-]*)")
# NAME=VALUE anywhere in an argument: --hf-token=V, HF_TOKEN=V, ?token=V&...
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.-])(-{0,2}([A-Za-z_][A-Za-z0-9_.-]*))=([^\s&;,'\"]+)")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]*):([^\s/@]+)@")
_AUTHORIZATION = re.compile(r"(?i)\b(authorization:\s*(?:[a-z]+\s+)?)([^\s'\"]+)")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_RUN = re.compile(r"(?<![A-Za-z0-9+/_.-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/_.=-])")
_PIECES = re.compile(r"[-_/+=]+")
_KEY_PIECE = 24


def secret_name(name: str) -> bool:
    """Whether an option or variable named `name` (dashes and all) holds a credential: its
    last word is a credential's."""
    words = [w for w in _WORD_BREAK.split(name.lstrip("-")) if w]
    return bool(words) and words[-1].lower() in _SECRET_WORDS


def looks_like_key(text: str) -> bool:
    """Whether a run of letters, digits and `+/_-=` (32 or more) reads as a key rather than
    a path, a number or a name made of words (the module's docstring)."""
    if "/" in text and "+" not in text and not text.endswith("="):
        return False
    return any(len(p) >= _KEY_PIECE and re.search(r"[0-9]", p) and re.search(r"[A-Za-z]", p)
               for p in _PIECES.split(text))


@dataclass
class Redacted:
    """Arguments (or a text) with their credentials redacted, and what was: the names of
    the options and variables, or what kind of value it was."""

    args: list[str]
    what: list[str] = field(default_factory=list)

    def note(self, where: str = "the command line") -> str | None:
        """One line saying what was redacted, or None where nothing was."""
        if not self.what:
            return None
        named = ", ".join(dict.fromkeys(self.what))
        return (f"{where} is shown with what looks like a credential as {REDACTED} "
                f"({named}); the capture (.nsys-rep, .sqlite) keeps it, and the environment "
                "nsys saw: share those files with care")


def redact_args(args: Sequence[str]) -> Redacted:
    """`args` (a command line, one argument each) with each credential's value redacted:
    `--api-key VALUE` as two arguments as well as the forms within one argument."""
    out = Redacted([])
    secret_option = None
    for arg in args:
        if secret_option is not None and not arg.startswith("--"):
            out.args.append(REDACTED if arg != REDACTED else arg)
            if arg != REDACTED:
                out.what.append(secret_option)
            secret_option = None
            continue
        secret_option = None
        option = _OPTION.fullmatch(arg)
        if option and secret_name(option.group(1)):
            secret_option = arg
        out.args.append(_redact_in(arg, out.what))
    return out


def redact_text(text: str) -> str:
    """`text` (a message, a log line) with its credentials redacted, its words read as a
    command line's arguments."""
    parts = re.split(r"(\s+)", text)
    parts[0::2] = redact_args(parts[0::2]).args
    return "".join(parts)


def _redact_in(arg: str, what: list[str]) -> str:
    """One argument with what looks like a credential inside it redacted."""

    def assignment(m: re.Match) -> str:
        if not secret_name(m.group(2)) or m.group(3) == REDACTED:
            return m.group()
        what.append(m.group(1))
        return f"{m.group(1)}={REDACTED}"

    def url(m: re.Match) -> str:
        if m.group(2) == REDACTED:
            return m.group()
        what.append("a URL's password")
        return f"{m.group(1)}:{REDACTED}@"

    def authorization(m: re.Match) -> str:
        if m.group(2) == REDACTED:
            return m.group()
        what.append("an Authorization header")
        return m.group(1) + REDACTED

    def web_token(m: re.Match) -> str:
        what.append("a web token")
        return REDACTED

    def key(m: re.Match) -> str:
        if not looks_like_key(m.group()):
            return m.group()
        what.append(f"a {len(m.group())}-character key")
        return REDACTED

    arg = _ASSIGNMENT.sub(assignment, arg)
    arg = _URL_PASSWORD.sub(url, arg)
    arg = _AUTHORIZATION.sub(authorization, arg)
    arg = _JWT.sub(web_token, arg)
    return _RUN.sub(key, arg)
