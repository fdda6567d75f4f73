"""What inline interpreter code does: ``python -c``, ``node -e``, ``perl -pe 's/a/b/'``.

Code handed to an interpreter on the command line is usually a one-liner: print a version,
load a JSON file, count lines. ``inline_effects`` reads it statically and says what it does
*in shell terms*, so that the rules written for shell commands judge it too:

* the shell commands it runs (``os.system('ls')``, ``subprocess.run(['rm', '-rf', 'x'])``,
  ``execSync('ls')``);
* what it does to files, written as the equivalent command (``shutil.rmtree('/x')`` is
  ``rm -r -- /x``, ``open('f', 'w')`` is ``tee -- f``, ``open('f')`` is ``cat -- f``); every
  string constant that names a path (``'~/.aws/credentials'``) counts as a file it may read;
* the environment variables it reads (``*``: the whole environment);
* and, one reason each, what cannot be known statically (a command or path built at run time,
  ``eval`` of built text, sockets, ``ctypes`` ...): the caller records those as *opaque*.

Python is parsed with :mod:`ast`; JavaScript is tokenized, which is enough for one-liners:
anything outside a small vocabulary of harmless names is opaque. Other languages are not
analysed (``None``), except perl programs that only substitute text (``s/a/b/g``).
"""

from __future__ import annotations

import re

from callwarden.analysis.shell._inline_base import InlineEffects
from callwarden.analysis.shell._inline_js import javascript_effects
from callwarden.analysis.shell._inline_python import python_effects

__all__ = ["MAX_CODE", "InlineEffects", "inline_effects"]

MAX_CODE = 16_384


def inline_effects(family: str, code: str) -> InlineEffects | None:
    """Reads inline interpreter code; None when the language is not analysed.

    Args:
        family: the interpreter family (``python``, ``node``, ``perl`` ...).
        code: the program text (the value of ``-c`` / ``-e`` / ``-p``, or piped code).
    """
    if len(code) > MAX_CODE:
        return InlineEffects(opaque=("code too long to analyse",))
    if family in ("python", "pypy"):
        return python_effects(code)
    if family in ("node", "nodejs", "bun"):
        return javascript_effects(code)
    if (family == "perl" and (_PERL_SUBSTITUTION.fullmatch(code) or _PERL_PRINT.fullmatch(code))) \
            or (family == "ruby" and _RUBY_PRINT.fullmatch(code)):
        return InlineEffects()
    return None


# ``s/a/b/g`` or ``y/a-z/A-Z/`` (one or more, ``;``-separated): text in, text out. The ``e``
# modifier, ``@{[...]}`` / ``${\\...}`` interpolation, backticks and ``(?{...})`` run code, so
# they are not accepted; ``$1`` and ``$&`` are only text.
_PERL_SUBSTITUTION = re.compile(
    r"(?!.*\(\?\??\{)\s*(?:(?:s|y|tr)/(?:\\.|\$[0-9&]|[^/\\`@$])*/"
    r"(?:\\.|\$[0-9&]|[^/\\`@$])*/[gimsxrcdu]*\s*;?\s*)+", re.DOTALL)
# Printing a version constant or plain text: ``puts RUBY_VERSION``, ``print "$]\\n"``
# (no interpolation that runs code, no ENV).
_RUBY_PRINT = re.compile(
    r"\s*(?:puts|p|print)\s*\(?\s*(?:(?!ENV\b)[A-Z][A-Za-z0-9_]*(?:::[A-Z][A-Za-z0-9_]*)*"
    r"|'[^'\\]*'|\"[^\"\\#`]*\")\s*\)?\s*;?\s*")
_PERL_PRINT = re.compile(
    r"\s*(?:print|say)\s*\(?\s*(?:\$\]|\$\^[VO]|'[^'\\]*'"
    r"|\"(?:[^\"\\$@`]|\\n|\$\]|\$\^[VO])*\")\s*\)?\s*;?\s*")
