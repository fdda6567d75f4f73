"""JavaScript one-liners (``node -e``, ``node -p``) read token by token: enough for the usual
one-liner (print a version, read package.json), and opaque beyond a small vocabulary."""

from __future__ import annotations

import re
import shlex

from callwarden.analysis.shell._inline_base import InlineEffects, command, pathlike, quote_path

__all__ = ["javascript_effects"]


_JS_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")
  | (?P<template>`)
  | (?P<number>(?:0[xXoObB])?[0-9][0-9a-fA-F_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9]+)?n?|\.[0-9]+)
  | (?P<name>[A-Za-z_$][\w$]*)
  | (?P<punct>=>|\.\.\.|\?\.|[{}()\[\];,<>+\-*%&|^!~?:=.@#]|/)
""", re.VERBOSE | re.DOTALL)
_JS_REGEX = re.compile(r"/(?:\\.|\[(?:\\.|[^\]\\\n])*\]|[^/\\\n\[])+/[a-z]*")
# After these tokens a ``/`` starts a regular expression, not a division.
_JS_REGEX_AFTER = frozenset({"(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "+",
                             "-", "*", "%", "<", ">", "~", "^", "=>", "return", "typeof"})
_JS_SAFE_MODULES = frozenset({"path", "os", "util", "url", "querystring", "assert", "events",
                              "string_decoder", "buffer", "zlib", "perf_hooks", "timers",
                              "punycode", "crypto", "readline", "stream"})
_JS_DANGER = frozenset({
    "eval", "Function", "constructor", "__proto__", "__defineGetter__", "globalThis",
    "global", "window", "self", "module", "mainModule", "binding", "_linkedBinding",
    "dlopen", "fetch", "WebSocket", "XMLHttpRequest", "EventSource", "import", "Deno", "Bun",
    "fromCharCode", "fromCodePoint", "atob", "unescape", "Reflect", "Proxy", "setTimeout",
    "setInterval", "setImmediate", "execArgv", "child_process", "execSync", "spawnSync",
    "execFileSync", "exec", "spawn", "execFile", "fork", "vm", "worker_threads", "inspector",
    "dns", "net", "http", "https", "http2", "tls", "dgram", "cluster", "repl", "emit",
    "reallyExit", "kill", "abort", "chdir", "setuid", "setgid", "openStdin", "_rawDebug",
    "this", "arguments",
})
_JS_PROCESS = frozenset({"version", "versions", "platform", "arch", "argv", "argv0",
                         "execPath", "pid", "ppid", "cwd", "uptime", "memoryUsage", "hrtime",
                         "exit", "exitCode", "stdout", "stderr", "release", "title", "config",
                         "features", "nextTick", "cpuUsage", "resourceUsage", "umask",
                         "getuid", "getgid", "geteuid", "getegid", "emitWarning", "on", "once"})
_JS_FS = {
    "readFileSync": "cat --", "readFile": "cat --", "createReadStream": "cat --",
    "readdirSync": "ls --", "readdir": "ls --", "existsSync": "", "exists": "",
    "statSync": "", "stat": "", "lstatSync": "", "lstat": "", "accessSync": "", "access": "",
    "writeFileSync": "tee --", "writeFile": "tee --", "createWriteStream": "tee --",
    "appendFileSync": "tee -a --", "appendFile": "tee -a --", "unlinkSync": "rm --",
    "unlink": "rm --", "rmdirSync": "rmdir --", "rmdir": "rmdir --", "rmSync": "rm --",
    "rm": "rm --", "mkdirSync": "mkdir -p --", "mkdir": "mkdir -p --",
    "renameSync": "mv --", "rename": "mv --", "copyFileSync": "cp --", "copyFile": "cp --",
    "cpSync": "cp -r --", "cp": "cp -r --", "symlinkSync": "ln -s --", "symlink": "ln -s --",
    "truncateSync": "truncate -s 0 --", "truncate": "truncate -s 0 --",
}
_JS_FS_TWO = frozenset({"renameSync", "rename", "copyFileSync", "copyFile", "cpSync", "cp",
                        "symlinkSync", "symlink"})
_JS_CHILD = frozenset({"execSync", "exec", "spawnSync", "spawn", "execFileSync", "execFile"})


def _js_tokens(code: str) -> list[tuple[str, str]] | None:
    """(kind, text) tokens of JavaScript; template literals become their string parts and the
    tokens of their ``${...}`` expressions. None when the code does not tokenize."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(code):
        previous = out[-1][1] if out else "("
        if code[pos] == "/" and (previous in _JS_REGEX_AFTER or not out) \
                and code[pos:pos + 2] not in ("//", "/*"):
            match = _JS_REGEX.match(code, pos)
            if match is None:
                return None
            out.append(("regex", match.group()))
            pos = match.end()
            continue
        match = _JS_TOKEN.match(code, pos)
        if match is None:
            return None
        kind = match.lastgroup or ""
        if kind == "template":
            end = _js_template(code, pos + 1, out)
            if end is None:
                return None
            pos = end
            continue
        if kind != "space":
            text = match.group()
            out.append((kind, text[1:-1] if kind == "string" else text))
        pos = match.end()
    return out


def _js_template(code: str, pos: int, out: list[tuple[str, str]]) -> int | None:
    text: list[str] = []
    while pos < len(code):
        char = code[pos]
        if char == "\\":
            text.append(code[pos:pos + 2])
            pos += 2
        elif char == "`":
            out.append(("string", "".join(text)))
            return pos + 1
        elif code.startswith("${", pos):
            depth, start = 1, pos + 2
            pos = start
            while pos < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[pos], 0)
                pos += 1
            if depth:
                return None
            inner = _js_tokens(code[start:pos - 1])
            if inner is None:
                return None
            out.append(("string", "".join(text)))
            out.extend(inner)
            text = []
        else:
            text.append(char)
            pos += 1
    return None


def javascript_effects(code: str) -> InlineEffects:
    """What a JavaScript program does, as far as its tokens tell."""
    tokens = _js_tokens(code)
    if tokens is None:
        return InlineEffects(opaque=("does not tokenize as JavaScript",))
    commands: list[str] = []
    env: list[str] = []
    opaque: list[str] = []
    modules: dict[str, str] = {}  # local name -> module it holds
    used_strings: set[int] = set()
    count = len(tokens)

    def text(i: int) -> str:
        return tokens[i][1] if 0 <= i < count else ""

    def kind(i: int) -> str:
        return tokens[i][0] if 0 <= i < count else ""

    def required(i: int) -> str | None:
        """The module of ``require('m')`` starting at token ``i``."""
        if text(i) == "require" and text(i + 1) == "(" and kind(i + 2) == "string" \
                and text(i + 3) == ")":
            used_strings.add(i + 2)
            return text(i + 2).removeprefix("node:")
        return None

    for i in range(count):
        if text(i) in ("const", "let", "var") and kind(i + 1) == "name" and text(i + 2) == "=":
            module = required(i + 3)
            if module is not None:
                modules[text(i + 1)] = module
    i = 0
    while i < count:
        kind_i, word = tokens[i]
        after_dot = text(i - 1) in (".", "?.")
        if kind_i != "name":
            if word == "[" and (kind(i - 1) == "name" or text(i - 1) in (")", "]")):
                index = tokens[i + 1:i + 3]
                simple = len(index) == 2 and index[1][1] == "]" and index[0][0] in (
                    "number", "name", "string") and index[0][1] not in _JS_DANGER | {"env"}
                if not simple:
                    opaque.append("uses a computed property name")
            i += 1
            continue
        if text(i - 1) in ("const", "let", "var") and text(i + 1) == "=" \
                and required(i + 2) is not None:
            i += 6  # ``const fs = require('fs')``: judged where it is used
            continue
        module = required(i)
        if module is not None or (not after_dot and word in modules):
            if module is None:
                module = modules[word]
                end = i
            else:
                end = i + 3
            i = _js_module_use(module, tokens, end, commands, opaque, used_strings)
            continue
        if word == "require" and not after_dot:
            opaque.append("require() of a module named at run time")
        elif word == "process" and not after_dot:
            prop = text(i + 2) if text(i + 1) in (".", "?.") else ""
            if prop == "env":
                if text(i + 3) in (".", "?.") and kind(i + 4) == "name":
                    env.append(text(i + 4))
                    i += 5
                    continue
                if text(i + 3) == "[" and kind(i + 4) == "string" and text(i + 5) == "]":
                    env.append(text(i + 4))
                    used_strings.add(i + 4)
                    i += 6
                    continue
                env.append("*")
                i += 3
                continue
            if prop not in _JS_PROCESS:
                opaque.append(f"uses process{'.' + prop if prop else ''}")
            i += 3 if prop else 1
            continue
        elif word in _JS_DANGER:
            opaque.append(f"uses {word}")
        i += 1
    for j, (kind_j, word) in enumerate(tokens):
        if kind_j == "string" and j not in used_strings and pathlike(word):
            commands.append(command("cat --", quote_path(word)))
    return InlineEffects(tuple(commands), tuple(dict.fromkeys(env)),
                         tuple(dict.fromkeys(opaque)))


def _js_module_use(module: str, tokens: list[tuple[str, str]], end: int, commands: list[str],
                   opaque: list[str], used: set[int]) -> int:
    """Judges ``<module>.method('literal', ...)`` at ``tokens[end]``; returns where to go on."""
    count = len(tokens)

    def text(i: int) -> str:
        return tokens[i][1] if 0 <= i < count else ""

    def kind(i: int) -> str:
        return tokens[i][0] if 0 <= i < count else ""

    if module.startswith((".", "/")):
        commands.append(command("cat --", quote_path(module)))
        return end + 1
    if module in _JS_SAFE_MODULES:
        return end + 1
    family = module.removesuffix("/promises")
    if family not in ("fs", "child_process") or text(end + 1) not in (".", "?."):
        opaque.append(f"uses the {module} module")
        return end + 1
    method = text(end + 2)
    args: list[str] = []
    i = end + 4 if text(end + 3) == "(" else count
    while i < count and kind(i) == "string" and text(i + 1) in (",", ")"):
        args.append(text(i))
        used.add(i)
        i += 2
    options = tokens[i:i + 12] if i < count else []
    recursive = ("name", "recursive") in options and ("name", "true") in options
    if family == "child_process":
        if method in _JS_CHILD and args:
            commands.append(args[0] if method.startswith("exec") and method != "execFile"
                            and method != "execFileSync" else shlex.join(args))
            if text(i) == "[" or (method.startswith("spawn") and len(args) == 1
                                  and text(i - 1) == ","):
                opaque.append(f"child_process.{method} with arguments built at run time")
        else:
            opaque.append(f"child_process.{method or 'use'} of a command built at run time")
        return end + 3
    template = _JS_FS.get(method)
    need = 2 if method in _JS_FS_TWO else 1
    if template is None or len(args) < need:
        opaque.append(f"fs.{method or 'use'} of a path known only at run time")
        return end + 3
    if template:
        if method in ("rmSync", "rm", "rmdirSync", "rmdir") and recursive:
            template = "rm -r --"
        commands.append(command(template, *(quote_path(a) for a in args[:need])))
    return end + 3
