"""CEL ``if:`` conditions: a Common Expression Language expression over the call.

Compiled once with the Rust-backed ``cel`` package (``common-expression-language``). Turning
Python values into CEL values costs far more than evaluating a small expression, so the
expression is analysed when it is compiled and each call converts only what it reads:

- only the variables the expression references are passed;
- when a map variable is only ever read as ``args.name`` / ``args["name"]`` (or ``has(...)`` of
  that), only those top-level keys are passed, so huge arguments the expression never touches
  are never walked;
- a named list used only as ``x in lists.name`` is passed as the few of its items that could
  possibly be tested (the strings present in the call and the expression's string literals),
  so a list of 100,000 contacts costs no more than a list of ten; a map list read only by
  keys from the call (``lists.files[args.file_id].name``) as the entries of those keys
  (:mod:`callwarden.conditions.cel_lists`);
- ``s.matches('literal')`` compiles its pattern on every call in the bindings (~11 µs): a
  literal pattern is compiled once here, with RE2 (the syntax CEL specifies), and the
  expression calls it as a function of ours (``s.callwarden_matches_0()``);
- the functions of ours (:mod:`callwarden.conditions.cel_functions`: ``s.lowerAscii()``,
  ``luhn_valid(s)`` ...) are registered only for an expression that calls them, so one that
  calls none runs with a plain dict, as before.

Anything the analysis is unsure about falls back to passing the whole value: slower, never
different.
"""

from __future__ import annotations

import enum
import math
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from pathlib import PurePath
from typing import Any, NamedTuple

from callwarden.analysis.regex import searcher
from callwarden.conditions.base import CompileEnv, Hit, Subject, register_condition
from callwarden.conditions.cel_functions import FUNCTIONS, STRING_BUILDERS, explain, functions_for
from callwarden.conditions.cel_lists import ListBinder, keyed_maps
from callwarden.conditions.cel_native import compile_native, native_lists
from callwarden.exceptions import CelError, ConfigError, MissingDependency

__all__ = ["CelCondition", "CelError"]

VARIABLES = ("tool", "args", "agent", "session", "principal", "context", "kind", "lists",
             "history", "roles", "request")
_MAP_VARIABLES = frozenset({"args", "context", "lists", "history", "roles", "request"})
# Type names are identifiers in CEL (``type(x) == int``), not variables of ours.
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map",
                         "null_type", "type", "dyn"})
# Functions that cannot build a string that is neither in the call nor a literal; any other
# call (``string(x)``, ``s.lowerAscii()``, unknown functions) or a ``+`` disables list narrowing.
_NON_STRING_FUNCS = frozenset({"size", "has", "all", "exists", "exists_one", "filter", "map",
                               "contains", "startsWith", "endsWith", "matches", "int", "uint",
                               "double", "bool", "type", "dyn"}) | (
    frozenset(FUNCTIONS) - STRING_BUILDERS)
# Tokens that may follow ``lists.name`` when it is the whole right operand of ``in``: they bind
# looser than ``in`` (or close a group), so ``x in lists.a == y`` is ``(x in lists.a) == y``.
_AFTER_IN_OPERAND = frozenset({None, ")", "]", "}", ",", "&&", "||", "?", ":", "==", "!=", "<",
                               "<=", ">", ">=", "in"})
_EMPTY_HISTORY: Mapping[str, Any] = {"count": 0, "tools": {}, "attempts": {}, "effects": {},
                                     "tool_effects": {}, "last_time_by_tool": {}}
_MAX_WALK_DEPTH = 100
_ORDERING = frozenset({"<", "<=", ">", ">="})
# CEL runs to completion holding the GIL (the bindings have no cost limit), and nested
# comprehensions cost the product of the lists they walk: at ~0.4 µs a step, 10,000 items
# under two nested ``exists`` take 40 s. A call whose arguments would let the expression take
# more than this many steps is not evaluated: a policy_error, denied by default.
MAX_CEL_STEPS = 200_000
# Macros that loop over a list or map; ``in`` (a linear search of a list) and ``+`` (a
# list copy) inside one of them cost a loop too.
_LOOP_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_HINT = ("CEL looks like: args.amount > 100 && tool.startsWith(\"mcp__pay\"); quote the whole "
         "expression in YAML; variables: " + ", ".join(VARIABLES))

# The CEL lexer, enough to find identifiers outside string literals. Raw strings (r"...") keep
# backslashes literally, so they are matched before the escaped forms.
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*)
    |(?P<str>(?:[rR][bB]?|[bB][rR])(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n]*"|'[^'\n]*')
        |[bB]?(?:\"\"\"(?:[^\\]|\\[\s\S])*?\"\"\"|'''(?:[^\\]|\\[\s\S])*?'''
                 |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))
    |(?P<num>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+|[uU])?)
    |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,\[\](){}])
    """,
    re.VERBOSE,
)


class _Token(NamedTuple):
    kind: str
    text: str


class _Plan(NamedTuple):
    """What the expression reads, found when it is compiled."""

    keys: dict[str, frozenset[str] | None]  # variable -> top-level keys read, None = all
    membership: frozenset[str]  # lists used only as ``x in lists.name``
    literals: frozenset[str]  # the expression's string literals
    bound: frozenset[str]  # names bound by comprehensions (``r`` in ``.all(r, ...)``)


@register_condition("if")
class CelCondition:
    """``if: <CEL expression>``: holds when the expression evaluates to ``true``.

    Variables: ``tool`` (string), ``args`` (map), ``agent``, ``session``, ``principal`` (string
    or null), ``context`` (map the caller passed), ``kind`` (the tool profile's kind),
    ``lists`` (the policy's named lists, ``x in lists.contacts``; a map list's entries,
    ``lists.files[args.file_id].name``, a missing key an error), ``history`` (map from
    the engine, ``{count: 0, tools: {}}`` when none is given), ``roles`` (role -> the list of
    values playing it, ``roles.recipient``) and ``request`` (``text``: the user's request,
    and its entities one list per kind: ``request.emails``, ``request.ibans`` ...).

    Errors never allow silently: a missing key (``args.nope``), a type mismatch
    (``args.name > 1``), a failed conversion or a result that is not a bool raise
    :class:`CelError`, which the engine turns into the rule's ``on_error`` (deny by default).
    Guard optional keys with ``has(args.force) && args.force``. As in every CEL
    implementation, ``&&`` and ``||`` absorb an error when the other side decides
    (``true || args.nope`` is ``true``). Numbers compare across int and double
    (``args.amount > 100`` holds for 150.5). Note that the Rust implementation's ``size()``
    of a string counts UTF-8 bytes, not code points. Besides CEL's own functions, the
    expression may call those of :mod:`callwarden.conditions.cel_functions`
    (``args.to.lowerAscii()``, ``luhn_valid(args.card)`` ...): given arguments of other
    types they fail as the built-ins do.

    Raises:
        ConfigError: when the expression is not a string, does not parse, reads an unknown
            variable or names a list the policy does not declare.

    Attributes:
        expression: the CEL source.
    """

    __slots__ = ("_contexts", "_functions", "_getters", "_history_tools", "_hit", "_lists",
                 "_loops", "_native", "_native_lists", "_orders", "_program", "_splits",
                 "expression")

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if not isinstance(config, str) or not config.strip():
            raise ConfigError(
                f"'if' must be a CEL expression string, not {type(config).__name__} {config!r:.60}",
                hint=_HINT,
            )
        cel = _import_cel()
        self.expression = config
        try:
            cel.compile(config)  # the expression as written: its errors are the user's
            source, self._functions = _precompiled_matches(config, cel)
            self._program = cel.compile(source)
            self._contexts = threading.local()
        except Exception as e:  # the bindings raise ValueError; anything else is as fatal
            raise ConfigError(f"invalid CEL expression: {e}", hint=_HINT) from e
        called = self._program.functions()
        try:
            self._functions.update(functions_for(called))
        except Exception as e:  # its data would not load: every call would be an error
            raise ConfigError(f"a function of CEL expression {config!r:.120} cannot run: "
                              f"{type(e).__name__}: {e}") from e
        tokens = _tokenize(config)
        # Unreadable to our lexer: assume it orders values (see _check_finite).
        self._orders = tokens is None or any(t.text in _ORDERING for t in tokens)
        # Unreadable to our lexer: assume loops nest, so large arguments are refused.
        self._loops = _loop_depth(tokens) if tokens is not None else 3
        # ``s.split(sep)`` makes a list of a string: a loop over it costs the string's length.
        self._splits = 0 if "split" not in called else self._loops if tokens is None else sum(
            1 for i, t in enumerate(tokens[:-1]) if t.text == "split" and tokens[i + 1].text == "(")
        referenced = set(self._program.variables())
        plan = _plan(tokens, referenced, cel)
        unknown = sorted(referenced - set(VARIABLES) - _TYPE_NAMES - plan.bound)
        if unknown and tokens is not None:
            raise ConfigError(
                f"CEL expression uses unknown variable(s) {', '.join(unknown)}",
                hint=f"available variables: {', '.join(VARIABLES)}",
            )
        lists = env.lists
        list_keys = plan.keys.get("lists")
        for name in sorted(list_keys or ()):
            if name not in lists:
                known = ", ".join(sorted(lists)) or "none are defined"
                raise ConfigError(
                    f"CEL expression uses unknown list 'lists.{name}'",
                    hint=f"declare it under 'lists:' in the policy (known lists: {known})",
                )
        self._history_tools = None if tokens is None or "history" in plan.bound else \
            _history_tools(tokens, cel)
        self._hit = Hit(detail=f"if: {config.strip()[:200]}", code="condition")
        self._getters = tuple(
            (name, _getter(name, plan.keys[name])) for name in VARIABLES
            if name in plan.keys and name != "lists"
        )
        # Named lists are converted to CEL-ready values once; only narrowed lists are
        # (cheaply) rebuilt per call.
        self._lists: ListBinder | None = None
        source_tokens = _tokenize(source) if tokens is not None else None
        self._native = None if source_tokens is None else compile_native(
            source_tokens, {**FUNCTIONS, **self._functions}, cel.evaluate)
        self._native_lists: dict[str, Any] | None = None
        if "lists" in plan.keys:
            names = sorted(lists) if list_keys is None else sorted(list_keys)
            self._native_lists = native_lists({n: lists[n] for n in names})
            maps = frozenset(n for n in names if isinstance(lists[n], Mapping))
            keyed, selected = keyed_maps(
                tokens, maps, frozenset(VARIABLES) - {"lists"}, cel,
            ) if maps and tokens is not None and list_keys is not None else (frozenset(),) * 2
            self._lists = ListBinder({n: lists[n] for n in names}, plan.membership, keyed,
                                     plan.literals | selected)

    @property
    def uses_history(self) -> bool:
        """True when the expression reads ``history`` (the engine then loads the session's)."""
        return any(name == "history" for name, _ in self._getters)

    @property
    def history_tools(self) -> frozenset[str] | None:
        """The tools whose entries the expression reads in ``history``'s per-tool maps
        (``history.tools["bash"]``, ``"web_fetch" in history.attempts``), or None when it may
        read any (``history.tools.exists(...)``, ``history.effects``, ``size(...)``): the
        engine then loads the whole history, else only these tools' (a cost flat in the
        number of tools the session called)."""
        return self._history_tools

    def __call__(self, subject: Subject) -> Hit | None:
        """Returns the Hit when the expression is true, None when false.

        Raises:
            CelError: when evaluation fails or the result is not a bool.
        """
        activation = {name: get(subject) for name, get in self._getters}
        if self._native is not None and self._loops <= 1:  # the fast path (cel_native)
            if self._native_lists is not None:
                activation["lists"] = self._native_lists
            try:
                result = self._native(activation)
            except Exception:  # Unsure, or a function's own error: the bindings say
                result = None
            if result is True:
                return self._hit
            if result is False:
                return None
            activation.pop("lists", None)
        if self._lists is not None:
            activation["lists"] = self._lists_for(activation)
        if self._loops > 1:
            self._check_cost(activation)
        if self._orders:
            self._check_finite(activation)
        try:
            result = self._program.execute(self._context(activation))
        except Exception as e:
            # Values the bindings cannot convert (Decimal, UUID, enum ...) and whole numbers
            # sent as 1500.0 (one JSON number, but a CEL double that `* 2` refuses) get one
            # retry in a CEL-friendly form; what still fails is an error, never a silent False.
            if not _retryable(e):
                raise self._error(e) from e
            try:
                result = self._program.execute(
                    self._context(_convertible(activation, self.expression)))
            except Exception as e2:
                raise self._error(e2) from e2
        if result is True:
            return self._hit
        if result is False:
            return None
        raise CelError(
            f"CEL condition {self.expression!r:.120} returned {type(result).__name__} "
            f"{result!r:.60}, not a bool",
            expression=self.expression,
        )

    def _context(self, activation: dict[str, Any]) -> Any:
        """What the program runs with: the variables, and the precompiled patterns if any (a
        context per thread: the bindings' contexts are not thread-safe)."""
        if not self._functions:
            return activation
        ctx = getattr(self._contexts, "ctx", None)
        if ctx is None:
            ctx = self._contexts.ctx = _import_cel().Context(functions=self._functions)
        ctx.update(activation)  # the same variables every call: each is replaced
        return ctx

    @property
    def _member_lists(self) -> tuple[tuple[str, frozenset[str], tuple[str, ...]], ...]:
        """The set lists narrowed per call: (name, items, the literals among them)."""
        return () if self._lists is None else self._lists.sets

    def _lists_for(self, activation: Mapping[str, Any]) -> dict[str, Any]:
        binder = self._lists
        if binder is None:
            return {}
        if not binder.narrows:
            return binder.bind(set())
        candidates: set[str] = set()
        complete = True
        for value in activation.values():
            complete = _collect_strings(value, candidates, 0) and complete
        return binder.bind(candidates if complete else None)

    def _check_cost(self, activation: Mapping[str, Any]) -> None:
        """Refuses a call whose arguments would make the nested loops too long to run."""
        widest = max(_widest(value, 0) for value in activation.values())
        steps, what = widest ** self._loops, f"a collection of {widest:,} items"
        if self._splits:
            # Each ``split`` call site makes at most one loop level as long as the longest string.
            longest = max(_longest_string(value, 0) for value in activation.values())
            levels = min(self._splits, self._loops)
            if longest > widest:
                steps = longest ** levels * max(widest, 1) ** (self._loops - levels)
                what = f"a string of {longest:,} characters to split"
        if steps > MAX_CEL_STEPS:
            raise CelError(
                f"CEL condition {self.expression!r:.120} was not evaluated: its loops nest "
                f"{self._loops} deep and the call holds {what}, up to {steps:,} steps (at most "
                f"{MAX_CEL_STEPS:,})", expression=self.expression)

    def _check_finite(self, activation: Mapping[str, Any]) -> None:
        """Refuses a NaN or an infinity where the expression orders values.

        No order holds for a NaN: ``args.amount > 100`` and ``args.amount <= 100`` are both
        false, so a deny rule's comparison would let it through (and an infinity minus itself,
        or times zero, is a NaN). Neither is JSON: a model's call holds one only when something
        made it up. The fast path (cel_native) leaves such an ordering to this path."""
        for name, value in activation.items():
            if name != "lists" and not _finite(value, 0):  # lists: checked at load
                raise CelError(
                    f"CEL condition {self.expression!r:.120} was not evaluated: {name} holds a "
                    "NaN or an infinity, which no comparison can order", expression=self.expression)

    def _error(self, e: BaseException) -> CelError:
        if isinstance(e, KeyError):
            what = f"no such key {e.args[0]!r}" if e.args else "no such key"
        elif _NOT_TEXT.__name__ in str(e):
            what = "matches() of a value that is not a string"
        else:
            what = explain(str(e)) or f"{type(e).__name__}: {e}"
        return CelError(f"CEL condition {self.expression!r:.120} failed: {what}",
                        expression=self.expression)

    def __repr__(self) -> str:
        return f"CelCondition({self.expression!r})"


def _import_cel() -> Any:
    try:
        import cel
    except ImportError as e:
        missing = MissingDependency("'if' conditions (CEL)", "common-expression-language")
        raise ConfigError(str(missing), hint=str(missing)) from e
    return cel


_WHOLE: Mapping[str, Callable[[Subject], Any]] = {
    "tool": lambda s: s.call.tool,
    "agent": lambda s: s.call.agent,
    "session": lambda s: s.call.session,
    "principal": lambda s: s.call.principal,
    "kind": lambda s: s.profile.kind,
    "args": lambda s: s.call.args,
    "context": lambda s: s.call.context,
    "history": lambda s: s.memo.get("history") or _EMPTY_HISTORY,
    "roles": lambda s: {role: list(s.role_values(role)) for role in _role_names(s)},
    "request": lambda s: _request(s),
}


def _role_names(subject: Subject) -> tuple[str, ...]:
    """The roles a call can have: the built-in ones and those its profile names."""
    from callwarden._profiles import ARG_ROLES

    return (*ARG_ROLES, *(r for r in subject.profile.roles if r not in ARG_ROLES))


def _request(subject: Subject) -> dict[str, Any]:
    """``request``: the user's request (``context.request``) as ``text`` and its entities,
    one list per kind (``request.emails``); extracted once per text."""
    context = subject.call.context
    text = context.get("request") if context else None
    return _request_of(text if isinstance(text, str) else "")


@lru_cache(maxsize=64)
def _request_of(text: str) -> dict[str, Any]:
    """``request`` for one text (a session's calls share their request: built once)."""
    from callwarden.analysis.entities import extract

    return {"text": text, **extract(text).as_dict()}


class matches_needs_a_string:  # its name is what an error message shows
    """Returned by a precompiled ``matches`` for a value that is not a string: the bindings
    cannot convert it, so the expression fails as the built-in ``matches`` does (raising
    instead would make the bindings print to stderr)."""


_NOT_TEXT = matches_needs_a_string
# \d is Unicode in the Rust regex crate the bindings use (\p{Nd}) and ASCII in RE2, so it is
# written out; \w, \s and \b have no RE2 spelling (RE2 knows no Alphabetic or White_Space
# property), so a pattern with one keeps the built-in matches: no pattern means two things.
_UNICODE_CLASS = {"d": "\\p{Nd}", "D": "\\P{Nd}"}
_NO_RE2_SPELLING = frozenset("wWsSbB")


def _as_re2(pattern: str) -> str | None:
    """``pattern`` (the Rust regex crate's syntax, as CEL runs it) in RE2's, or None when it
    cannot be said the same way (then the built-in matches keeps it)."""
    if "(?-u" in pattern or "\\Q" in pattern:
        return None
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in _NO_RE2_SPELLING:
                return None
            out.append(_UNICODE_CLASS.get(nxt) or pattern[i:i + 2])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_MATCHES_PREFIX = "callwarden_matches_"


def _precompiled_matches(config: str, cel: Any) -> tuple[str, dict[str, Callable[[Any], Any]]]:
    """``config`` with each ``.matches(<string literal>)`` replaced by a call of the pattern
    compiled once (``.callwarden_matches_N()``), and those functions by name. Unchanged
    where the lexer is unsure, the literal is not a string, or RE2 cannot read the pattern."""
    spans = _spans(config)
    if spans is None:
        return config, {}
    pieces: list[str] = []
    functions: dict[str, Callable[[Any], Any]] = {}
    last = i = 0
    while i + 4 < len(spans):
        dot, name, opening, literal, closing = spans[i:i + 5]
        found = (dot[1], name[1], opening[1], closing[1]) == (".", "matches", "(", ")") \
            and literal[0] == "str"
        pattern = cel.evaluate(literal[1]) if found else None
        spelled = _as_re2(pattern) if isinstance(pattern, str) else None
        search = searcher(spelled) if spelled is not None else None
        if search is None:
            i += 1
            continue
        fname = f"{_MATCHES_PREFIX}{len(functions)}"
        functions[fname] = _matches(search)
        pieces += [config[last:dot[2]], f".{fname}()"]
        last = closing[3]
        i += 5
    if not functions:
        return config, {}
    return "".join([*pieces, config[last:]]), functions


def _matches(search: Callable[[str], bool]) -> Callable[[Any], Any]:
    def matches(value: Any) -> Any:
        return search(value) if type(value) is str else _NOT_TEXT()
    return matches


def _getter(name: str, keys: frozenset[str] | None) -> Callable[[Subject], Any]:
    whole = _WHOLE[name]
    if keys is None:
        return whole
    wanted = tuple(sorted(keys))
    if name == "roles":  # only the roles the expression reads are collected
        return lambda s: {role: list(s.role_values(role)) for role in wanted}

    def narrowed(s: Subject) -> Any:
        value = whole(s)
        if not isinstance(value, Mapping):
            return value  # CEL reports the type error
        return {k: value[k] for k in wanted if k in value}

    return narrowed


def _spans(text: str) -> list[tuple[str, str, int, int]] | None:
    """The tokens of ``text`` outside whitespace and comments: (kind, text, start, end); None
    for something this lexer does not know (``a.`b-c```)."""
    spans = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        kind = m.lastgroup or ""
        if kind != "ws":
            spans.append((kind, m.group(), m.start(), m.end()))
        pos = m.end()
    return spans


def _tokenize(text: str) -> list[_Token] | None:
    spans = _spans(text)
    return None if spans is None else [_Token(kind, token) for kind, token, _, _ in spans]


def _plan(tokens: list[_Token] | None, referenced: set[str], cel: Any) -> _Plan:
    """Finds which keys of each map variable the expression reads (None when unsure)."""
    try:
        return _plan_tokens(tokens, referenced, cel)
    except Exception:
        # A literal this lexer cut wrongly: CEL compiled the whole, so only narrowing is lost.
        return _Plan(dict.fromkeys(referenced & set(VARIABLES)), frozenset(), frozenset(),
                     frozenset())


def _plan_tokens(tokens: list[_Token] | None, referenced: set[str], cel: Any) -> _Plan:
    keys: dict[str, set[str] | None] = {}
    membership: set[str] = set()
    not_membership: set[str] = set()
    literals: set[str] = set()
    bound: set[str] = set()
    synthesizes = False
    seen: set[str] = set()
    toks = tokens or []
    text = [t.text for t in toks] + [None, None, None]
    for i, tok in enumerate(toks):
        if tok.kind == "str":
            value = cel.evaluate(tok.text)
            if isinstance(value, str):
                literals.add(value)
        elif tok.text == "+":
            synthesizes = True
        elif tok.kind != "id":
            continue
        elif text[i + 1] == "(" and text[i - 1] == "." and i > 0:
            if tok.text not in _NON_STRING_FUNCS:
                synthesizes = True
            # ``.all(r, ...)`` and ``.all(k, v, ...)`` bind names, which may shadow ours; the
            # functions of ours are no macros (``s.replace(args.a, "b")`` binds nothing).
            if toks[i + 2:i + 3] and toks[i + 2].kind == "id" and text[i + 3] == "," \
                    and tok.text not in FUNCTIONS:
                bound.add(toks[i + 2].text)
                if toks[i + 4:i + 5] and toks[i + 4].kind == "id" and text[i + 5] == ",":
                    bound.add(toks[i + 4].text)
        elif text[i + 1] == "(":
            synthesizes = synthesizes or tok.text not in _NON_STRING_FUNCS
        elif tok.text in VARIABLES and (i == 0 or text[i - 1] != "."):
            name = tok.text
            seen.add(name)
            key, end = _selected_key(toks, text, i, cel)
            if name not in _MAP_VARIABLES:
                keys[name] = None
                continue
            if key is None:
                keys[name] = None
            elif name not in keys or keys[name] is not None:
                keys.setdefault(name, set()).add(key)  # type: ignore[union-attr]
            if name == "lists" and key is not None:
                is_operand = text[i - 1] == "in" and i > 0 and text[end] in _AFTER_IN_OPERAND
                (membership if is_operand and toks[i + 1].text == "." else not_membership).add(key)
    used = referenced & set(VARIABLES)
    # The lexer cross-checks the compiler: every variable the compiler saw must have been seen
    # here, and none may be shadowed by a comprehension, or nothing is narrowed.
    if tokens is None or not used <= seen or bound & set(VARIABLES):
        all_keys: dict[str, frozenset[str] | None] = dict.fromkeys(used)
        return _Plan(all_keys, frozenset(), frozenset(), frozenset(bound))
    final = {n: (None if keys.get(n) is None else frozenset(keys[n] or ())) for n in used}
    member = frozenset() if synthesizes or final.get("lists") is None else frozenset(
        membership - not_membership)
    return _Plan(final, member, frozenset(literals), frozenset(bound))


def _selected_key(
    toks: list[_Token], text: list[str | None], i: int, cel: Any
) -> tuple[str | None, int]:
    """The key read right after variable ``i`` (``v.key`` / ``v["key"]``) and the next index."""
    if text[i + 1] == "." and toks[i + 2:i + 3] and toks[i + 2].kind == "id" \
            and text[i + 3] != "(":
        return toks[i + 2].text, i + 3
    if text[i + 1] == "[" and toks[i + 2:i + 3] and toks[i + 2].kind == "str" \
            and text[i + 3] == "]":
        value = cel.evaluate(toks[i + 2].text)
        if isinstance(value, str):
            return value, i + 4
    return None, i + 1


_PER_TOOL = frozenset({"tools", "attempts", "tool_effects", "last_time_by_tool"})
_HISTORY_SCALARS = frozenset({"session", "count", "last_tool", "last_time", "first_time"})
# Tokens that may come before a literal that is the whole left operand of ``in``: they bind
# looser (``'a' + 'x' in history.tools`` tests ``'ax'``).
_BEFORE_IN_OPERAND = frozenset({"(", "[", "{", ",", "&&", "||", "?", ":"})


def _history_tools(tokens: list[_Token], cel: Any) -> frozenset[str] | None:
    """The tools whose entries the expression reads in ``history`` (see ``history_tools``)."""
    text: list[str | None] = [t.text for t in tokens] + [None, None, None]
    found: set[str] = set()
    for i, tok in enumerate(tokens):
        if tok.kind != "id" or tok.text != "history" or (i and text[i - 1] == "."):
            continue
        field, after = _selected_key(tokens, text, i, cel)
        if field in _HISTORY_SCALARS:
            continue
        if field not in _PER_TOOL:
            return None  # history whole, history.effects ...
        key, _ = _selected_key(tokens, text, after - 1, cel)  # history.tools["x"], .tools.x
        if key is None and i > 1 and text[i - 1] == "in" and tokens[i - 2].kind == "str" \
                and (i == 2 or text[i - 3] in _BEFORE_IN_OPERAND) \
                and text[after] in _AFTER_IN_OPERAND:
            key = cel.evaluate(tokens[i - 2].text)  # "x" in history.tools
        if not isinstance(key, str):
            return None
        found.add(key)
    return frozenset(found)


def _loop_depth(tokens: list[_Token]) -> int:
    """How deeply the expression's loops nest: each loop macro is a level, and so is each
    ``in``, and each ``+`` inside a macro (it may copy a list) unless it adds a literal."""
    depth = 0
    frames: list[bool] = []  # one per open bracket: is it a loop macro's argument list?
    text = [t.text for t in tokens]
    for i, tok in enumerate(tokens):
        inside = sum(frames)
        if tok.text in ("(", "[", "{"):
            macro = i > 1 and text[i - 2] == "." and tokens[i - 1].text in _LOOP_MACROS
            frames.append(macro)
            if macro:
                depth = max(depth, inside + 1)
        elif tok.text in (")", "]", "}"):
            if frames:
                frames.pop()
        elif (tok.kind == "id" and tok.text == "in") or (tok.text == "+" and inside and not (
                {tokens[i - 1].kind, tokens[i + 1].kind if i + 1 < len(tokens) else ""}
                & {"num", "str"})):  # adding a number or a literal string is no loop
            depth = max(depth, inside + 1)
    return depth


def _widest(value: Any, depth: int) -> int:
    """The length of the longest list, map or string-free collection in ``value``."""
    if isinstance(value, str | bytes) or depth > _MAX_WALK_DEPTH:
        return 0
    if isinstance(value, Mapping):
        return max(len(value), *(_widest(v, depth + 1) for v in value.values()), 0)
    if isinstance(value, list | tuple | set | frozenset):
        return max(len(value), *(_widest(v, depth + 1) for v in value), 0)
    return 0


def _finite(value: Any, depth: int) -> bool:
    """False when ``value`` holds a float that is NaN or infinite (``Decimal('NaN')`` too)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if isinstance(value, float | Decimal):
        return value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
    if depth > _MAX_WALK_DEPTH:
        return True  # the conversion refuses it: nested too deeply
    if isinstance(value, Mapping):
        return all(_finite(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return all(_finite(v, depth + 1) for v in value)
    return True


def _longest_string(value: Any, depth: int) -> int:
    """The length of the longest string in ``value`` (map keys too): ``split("")`` of it
    makes a list one item per character."""
    if isinstance(value, str):
        return len(value)
    if depth > _MAX_WALK_DEPTH:
        return 0
    if isinstance(value, Mapping):
        return max(0, *(len(k) for k in value if isinstance(k, str)),
                   *(_longest_string(v, depth + 1) for v in value.values()))
    if isinstance(value, list | tuple | set | frozenset):
        return max(0, *(_longest_string(v, depth + 1) for v in value))
    return 0


def _retryable(e: Exception) -> bool:
    text = str(e)
    return (isinstance(e, ValueError) and text.startswith("Conversion Error")) or (
        "Unsupported operation" in text or "No such overload" in text)


def _collect_strings(value: Any, out: set[str], depth: int) -> bool:
    """Adds every string in ``value`` (map keys too) to ``out``; False if it is too deep."""
    if isinstance(value, str):
        out.add(value)
        return True
    if depth > _MAX_WALK_DEPTH:
        return False
    complete = True
    if isinstance(value, Mapping):
        out.update(k for k in value if isinstance(k, str))
        for v in value.values():
            complete = _collect_strings(v, out, depth + 1) and complete
    elif isinstance(value, list | tuple):
        for v in value:
            complete = _collect_strings(v, out, depth + 1) and complete
    elif isinstance(value, enum.Enum | uuid.UUID | PurePath | set | frozenset):
        complete = _collect_strings(_friendly(value), out, depth + 1)
    return complete


def _friendly(value: Any) -> Any:
    """The CEL-convertible stand-in for a Python value the bindings do not convert."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Decimal | Fraction):
        return float(value)
    if isinstance(value, uuid.UUID | PurePath):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return value


def _convertible(activation: Mapping[str, Any], expression: str) -> dict[str, Any]:
    return {k: _deep_friendly(v, expression, 0) for k, v in activation.items()}


def _deep_friendly(value: Any, expression: str, depth: int) -> Any:
    if type(value) is float and value.is_integer() and abs(value) <= 2 ** 53:
        return int(value)  # 1500.0 is the JSON number 1500
    if value is None or isinstance(value, str | bool | int | float | bytes):
        return value
    if depth > _MAX_WALK_DEPTH:
        raise CelError("arguments are nested too deeply for a CEL condition",
                       expression=expression)
    if isinstance(value, Mapping):
        return {str(k): _deep_friendly(v, expression, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_deep_friendly(v, expression, depth + 1) for v in value]
    friendly = _friendly(value)
    if friendly is value:
        return value  # datetime, timedelta ... convert natively; others fail loudly later
    return _deep_friendly(friendly, expression, depth + 1)
