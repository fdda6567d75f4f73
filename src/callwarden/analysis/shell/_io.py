"""Which paths a command reads and writes, from its canonical options and operands."""

from __future__ import annotations

import re
from collections.abc import Sequence

from callwarden.analysis.shell._model import SimpleCommand
from callwarden.analysis.shell._programs import program_family

__all__ = ["command_io", "command_removals"]

# Programs whose every operand is a file they read.
_READ_ALL = frozenset({
    "cat", "tac", "less", "more", "nl", "od", "hexdump", "strings", "base64", "base32", "xxd",
    "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "shasum", "b2sum",
    "cksum", "wc", "sort", "uniq", "cut", "paste", "diff", "cmp", "comm", "iconv", "column",
    "fold", "fmt", "bat", "batcat", "view", "vim", "vi", "nvim", "nano", "emacs", "code",
    "source", ".", "zcat", "bzcat", "xzcat", "gpg", "head", "tail", "expand", "tr",
    "xclip", "pbcopy", "nc", "ncat", "netcat", "lpr", "mail", "sendmail", "mutt", "split",
    "csplit", "look", "rev", "shuf", "tsort", "unexpand", "dos2unix", "zless", "zmore", "jq",
    "yq", "sqlite3", "crontab",
})
# Programs whose first operand is a pattern or script and the rest are files read.
_READ_AFTER_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "awk", "gawk", "mawk",
                               "nawk", "sed", "jq", "yq"})
# Programs whose every operand is a path they write, create or delete.
_WRITE_ALL = frozenset({"rm", "rmdir", "unlink", "truncate", "shred", "srm", "touch", "mkdir",
                        "tee", "wipefs", "mkfs", "mkswap", "blkdiscard", "fallocate"})
# Programs whose every operand is a path they delete (or destroy the content of).
_DELETE_ALL = frozenset({"rm", "rmdir", "unlink", "shred", "srm", "wipe"})
_SCRIPT_RUNNERS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "python", "perl", "ruby",
                             "node", "php", "Rscript", "lua"})


def command_io(cmd: SimpleCommand) -> tuple[list[str], list[str]]:
    """Returns (reads, writes) of one command: paths as written, ``~`` left to the caller."""
    program = cmd.program or ""
    family = program_family(program)
    pos = cmd.positionals
    reads: list[str] = []
    writes: list[str] = []
    if program == "jq" or program == "yq":
        reads.extend(pos[0 if cmd.option_values("from-file") else 1 :])
    elif family in _READ_AFTER_FIRST:
        has_script = bool(cmd.option_values("regexp") or cmd.option_values("expression")
                          or cmd.option_values("file") or cmd.option_values("f"))
        files = pos if has_script else pos[1:]
        reads.extend(files)
        if program == "sed" and "in-place" in cmd.flags:
            writes.extend(files)
        reads.extend(cmd.option_values("file"))
    elif program in _READ_ALL or family in _READ_ALL:
        if program in ("base64", "base32") and "decode" not in cmd.flags:
            reads.extend(pos)
        elif program == "xxd":
            reads.extend(pos[:1])
            writes.extend(pos[1:2])
        elif program == "crontab":
            reads.extend(p for p in pos if p != "-")
        elif program in ("nc", "ncat", "netcat"):
            pass
        else:
            reads.extend(pos)
    elif family in _WRITE_ALL:
        writes.extend(pos)
    elif program in ("cp", "mv", "install", "ln"):
        _copy_like(cmd, reads, writes, move=program == "mv", link=program == "ln")
    elif program in ("scp", "rsync"):
        _copy_like(cmd, reads, writes, move="remove-source-files" in cmd.flags, remote=True)
    elif program == "dd":
        reads.extend(cmd.option_values("if"))
        writes.extend(cmd.option_values("of"))
    elif program == "tar":
        _tar(cmd, reads, writes)
    elif program in ("zip", "7z", "7za"):
        writes.extend(pos[:1] if program == "zip" else pos[1:2])
        reads.extend(pos[1:] if program == "zip" else pos[2:])
    elif program == "unzip":
        reads.extend(pos[:1])
        writes.extend(cmd.option_values("directory") or ((".",) if pos else ()))
    elif program in ("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd"):
        reads.extend(pos)
        if "c" not in cmd.flags and "stdout" not in cmd.flags:
            writes.extend(pos)
    elif program == "curl":
        _curl(cmd, reads, writes)
    elif program == "wget":
        for key in ("post-file", "body-file", "input-file"):
            reads.extend(cmd.option_values(key))
        writes.extend(v for v in cmd.option_values("output-document") if v != "-")
        writes.extend(cmd.option_values("output-file"))
    elif program in ("openssl",):
        reads.extend(_after(cmd.argv, "-in"))
        writes.extend(_after(cmd.argv, "-out"))
    elif program == "ssh-keygen":
        target = cmd.option_values("file")
        (reads if "y" in cmd.flags or "l" in cmd.flags else writes).extend(target)
    elif program == "psql":
        reads.extend(cmd.option_values("file"))
        writes.extend(cmd.option_values("output"))
    elif program == "xargs":
        reads.extend(cmd.option_values("a"))
    elif family == "perl" and _runs_inline(cmd):
        reads.extend(pos)
        if "i" in cmd.flags or any(key.startswith("i") for key, _ in cmd.options):
            writes.extend(pos)  # perl -pi -e 's/a/b/' files: edited in place
    elif family in _SCRIPT_RUNNERS and pos and pos[0] != "-" and not _runs_inline(cmd):
        reads.append(pos[0])
    return reads, writes


def command_removals(cmd: SimpleCommand) -> tuple[list[str], list[str]]:
    """Returns (deletes, empties) of one command: the paths it deletes, and the files it
    empties or shrinks in place (``truncate -s 0``, ``cp /dev/null f``)."""
    program = cmd.program or ""
    pos = list(cmd.positionals)
    if program_family(program) in _DELETE_ALL:
        if "find" in cmd.wrappers:
            return pos, []  # ``start/**``: the entries below start that a find test selects
        # Written by hand, ``dir/**`` is every entry of dir (``*`` without globstar).
        return [p[:-1] if p == "**" or p.endswith("/**") else p for p in pos], []
    if program == "truncate":
        if cmd.option_values("reference") or any(_shrinks(v) for v in cmd.option_values("size")):
            return [], pos
        return [], []
    if program == "cp" and len(pos) == 2 and pos[0] == "/dev/null":
        return [], pos[1:]
    if program == "rsync" and any(flag.startswith("del") for flag in cmd.flags) and len(pos) >= 2 \
            and not _is_remote(pos[-1]):
        return [pos[-1].rstrip("/") + "/**"], []
    return [], []


def _shrinks(size: str) -> bool:
    """Whether ``truncate -s SIZE`` can cut a file: ``0``, ``-1K``, ``<1M``, ``/4K``, ``%4K``
    (``10M`` sets a size, usually to create or grow a file; ``+1K`` and ``>1K`` only grow)."""
    size = size.strip()
    if size[:1] in ("+", ">"):
        return False
    if size[:1] in ("-", "<", "/", "%"):
        return True
    digits = re.match(r"[0-9]*", size)
    return digits is None or digits.group().strip("0") == ""


def _runs_inline(cmd: SimpleCommand) -> bool:
    return any(key in ("command", "e", "eval", "print", "r", "module") for key, _ in cmd.options)


def _after(argv: Sequence[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def _is_remote(path: str) -> bool:
    head, colon, _ = path.partition(":")
    return bool(colon) and "/" not in head and not path.startswith(("./", "/", "~"))


def _copy_like(cmd: SimpleCommand, reads: list[str], writes: list[str], *, move: bool = False,
               link: bool = False, remote: bool = False) -> None:
    pos = list(cmd.positionals)
    target = cmd.option_values("target-directory")
    if target:
        sources, dest = pos, list(target)
    elif len(pos) >= 2:
        sources, dest = pos[:-1], pos[-1:]
    else:
        return
    for source in sources:
        if remote and _is_remote(source):
            continue
        if not link:
            reads.append(source)
        if move:
            writes.append(source)
    for path in dest:
        if not (remote and _is_remote(path)):
            writes.append(path)


def _tar(cmd: SimpleCommand, reads: list[str], writes: list[str]) -> None:
    archive = [a for a in cmd.option_values("file") if a != "-"]
    if cmd.flags & {"create", "append", "update"}:
        writes.extend(archive)
        reads.extend(cmd.positionals)
        reads.extend(cmd.option_values("files-from"))
    else:
        reads.extend(archive)
        if "extract" in cmd.flags:
            writes.extend(cmd.option_values("directory") or (".",))


def _curl(cmd: SimpleCommand, reads: list[str], writes: list[str]) -> None:
    for key, value in cmd.options:
        if value is None:
            continue
        if key in ("data", "json"):
            if value.startswith("@") and value != "@-":
                reads.append(value[1:])
            elif "@" in value and key == "data" and "=" not in value.split("@", 1)[0]:
                name, _, path = value.partition("@")  # --data-urlencode name@file
                if name and path and path != "-":
                    reads.append(path)
        elif key == "form":
            _, _, spec = value.partition("=")
            if spec[:1] in ("@", "<") and spec[1:2] != "-":
                reads.append(spec[1:].split(";", 1)[0])
        elif key in ("upload-file", "config", "cookie") and value != "-":
            if key != "cookie" or "=" not in value:
                reads.append(value)
        elif (key == "output" and value != "-") or (key == "cookie-jar" and value != "-"):
            writes.append(value)
