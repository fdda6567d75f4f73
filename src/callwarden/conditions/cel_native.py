"""CEL evaluated in Python for the plain cases, so a condition costs what its logic does.

The CEL bindings convert every variable an expression reads into their own values on every
call: about 1 µs for each string, list and map (a call's arguments, the request's entities),
10-30 µs for an expression over an e-mail's fields, much more than evaluating it. This module
compiles an expression once into Python closures that read the call's values as they are.

It is a fast path, never a second meaning. It evaluates only what it knows exactly: boolean
logic (``!``, ``&&``, ``||``, ``?:``), comparisons of two strings, two numbers (int or
double, not bool), two bools or two nulls, ``in`` a list of such values or a map's keys, field
selection, indexing, ``has()``, ``size()``, list literals, the string methods ``contains``,
``startsWith``, ``endsWith``, the ``exists`` and ``all`` macros over lists, and callwarden's
own functions (:mod:`callwarden.conditions.cel_functions`, and the ``matches`` patterns
compiled once). Anything else — arithmetic, other macros, map literals, timestamps, a literal
it cannot read — leaves the expression to the bindings (:func:`compile_native` returns None);
and at run time any value outside those cases (a missing key, mixed types, a result that is
not a bool, an error a function signals) makes :class:`CelCondition` evaluate that call with
the bindings, so errors and their messages are theirs. Where CEL absorbs an error (``false &&
x``, ``true || x``) the right side is not evaluated, as CEL would not let it decide.

A differential test evaluates generated expressions both ways and requires equal results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import isfinite
from typing import Any

from callwarden.exceptions import CallwardenError

__all__ = ["StringSet", "Unsure", "compile_native", "native_lists"]

Node = Callable[[dict[str, Any]], Any]

_INT64 = (-(1 << 63), (1 << 63) - 1)
_RELOPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in"})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
_NUMBERS = (int, float)


class StringSet(frozenset[str]):
    """A named list of strings as the fast path reads it: ``x in lists.name`` in O(1)."""

    __slots__ = ()


class Unsure(CallwardenError):
    """A value outside what the fast path evaluates exactly: the bindings decide."""


class _Unsupported(CallwardenError):
    """Compile time: the expression uses what the fast path does not evaluate."""


def compile_native(tokens: Sequence[tuple[str, str]], functions: Mapping[str, Callable[..., Any]],
                   literal: Callable[[str], Any]) -> Node | None:
    """The expression (its tokens: kind, text) as a closure over the variables, or None
    when it uses something the fast path does not evaluate. ``functions``: callable by name,
    as methods or functions; ``literal``: the CEL value of a literal token's text."""
    parser = _Parser(list(tokens), functions, literal)
    try:
        node = parser.expr()
    except (_Unsupported, IndexError):
        return None
    return node if parser.at_end() else None


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], functions: Mapping[str, Callable[..., Any]],
                 literal: Callable[[str], Any]) -> None:
        self.tokens, self.pos, self.functions, self.literal = tokens, 0, functions, literal

    # -- tokens ----------------------------------------------------------------------------

    def at_end(self) -> bool:
        return self.pos == len(self.tokens)

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, text: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.pos]
        if text is not None and token[1] != text:
            raise _Unsupported(text)
        self.pos += 1
        return token

    def ident(self) -> str:
        kind, text = self.take()
        if kind != "id":
            raise _Unsupported(text)
        return text

    # -- grammar (CEL's, in precedence order) ----------------------------------------------

    def expr(self) -> Node:
        cond = self.or_()
        if self.peek() != "?":
            return cond
        self.take("?")
        then = self.or_()
        self.take(":")
        other = self.expr()
        return lambda env: then(env) if _bool(cond(env)) else other(env)

    def or_(self) -> Node:
        left = self.and_()
        while self.peek() == "||":
            self.take()
            left = _or(left, self.and_())
        return left

    def and_(self) -> Node:
        left = self.relation()
        while self.peek() == "&&":
            self.take()
            left = _and(left, self.relation())
        return left

    def relation(self) -> Node:
        left = self.unary()
        while True:
            op = self.peek()
            if op in _ARITHMETIC:
                raise _Unsupported(op)
            if op not in _RELOPS:
                return left
            self.take()
            right = self.unary()
            if self.peek() in _ARITHMETIC:
                raise _Unsupported("arithmetic")
            left = _relation(op, left, right)

    def unary(self) -> Node:
        if self.peek() == "!":
            nots = 0
            while self.peek() == "!":
                self.take()
                nots += 1
            operand = self.member()
            if nots % 2 == 0:
                return lambda env: _bool(operand(env))
            return lambda env: not _bool(operand(env))
        if self.peek() == "-":
            self.take()
            kind, text = self.take()
            if kind != "num":
                raise _Unsupported("unary minus of something that is not a number literal")
            value = self._literal(kind, text)
            if type(value) not in _NUMBERS or self.peek() in (".", "["):
                raise _Unsupported("unary minus")
            negative = -value
            return lambda env: negative
        return self.member()

    def member(self) -> Node:
        return self.member_parts()[0]

    def member_parts(self) -> tuple[Node, Node | None, str | None]:
        """The member expression, and when its last step selects a field: what it selects
        from and the field (what ``has()`` tests)."""
        node = self.primary()
        base: Node | None = None
        field: str | None = None
        while self.peek() in (".", "["):
            base, field = None, None
            if self.take()[1] == "[":
                index = self.expr()
                self.take("]")
                node = _index(node, index)
                continue
            name = self.ident()
            if self.peek() == "(":
                node = self.method(node, name)
            else:
                base, field = node, name
                node = _select(node, name)
        return node, base, field

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "id":
            if text in ("true", "false", "null"):
                value = {"true": True, "false": False, "null": None}[text]
                return lambda env: value
            if self.peek() == "(":
                return self.call(text)
            return _variable(text)
        if kind in ("num", "str"):
            value = self._literal(kind, text)
            return lambda env: value
        if text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if text == "[":
            items = self.arguments("]")
            return lambda env: tuple(item(env) for item in items)
        raise _Unsupported(text)

    def arguments(self, closing: str) -> list[Node]:
        items: list[Node] = []
        while self.peek() != closing:
            items.append(self.expr())
            if self.peek() != closing:
                self.take(",")
        self.take(closing)
        return items

    def call(self, name: str) -> Node:
        self.take("(")
        if name == "has":
            _, base, field = self.member_parts()
            self.take(")")
            if base is None or field is None:
                raise _Unsupported("has() of something that is not a field selection")
            return _has(base, field)
        args = self.arguments(")")
        if name == "size" and len(args) == 1:
            return _size(args[0])
        function = self.functions.get(name)
        if function is None:
            raise _Unsupported(name)
        return _call(function, args)

    def method(self, receiver: Node, name: str) -> Node:
        self.take("(")
        if name in ("exists", "all"):
            var = self.ident()
            self.take(",")
            predicate = self.expr()
            self.take(")")
            return _macro(name, receiver, var, predicate)
        args = self.arguments(")")
        if name in _STRING_METHODS and len(args) == 1:
            return _string_method(_STRING_METHODS[name], receiver, args[0])
        if name == "size" and not args:
            return _size(receiver)
        function = self.functions.get(name)
        if function is None:
            raise _Unsupported(name)
        return _call(function, [receiver, *args])

    def _literal(self, kind: str, text: str) -> Any:
        if (kind == "num" and text[-1:] in ("u", "U")) or text[:1] in ("b", "B") or \
                text[:2].lower() in ("rb", "br"):
            raise _Unsupported(text)  # unsigned ints and bytes
        try:
            value = self.literal(text)
        except Exception as e:
            raise _Unsupported(text) from e
        if type(value) not in (int, float, str) or (
                type(value) is int and not _INT64[0] <= value <= _INT64[1]):
            raise _Unsupported(text)
        return value


# -- runtime ----------------------------------------------------------------------------------

def _bool(value: Any) -> bool:
    if value is True or value is False:
        return value
    raise Unsure


def _or(left: Node, right: Node) -> Node:
    return lambda env: True if _bool(left(env)) else _bool(right(env))


def _and(left: Node, right: Node) -> Node:
    return lambda env: _bool(right(env)) if _bool(left(env)) else False


def _kind(value: Any) -> type | None:
    """The comparison class of a scalar: str, number, bool or None; anything else is unsure."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return kind
    if kind in _NUMBERS:
        if kind is int and not _INT64[0] <= value <= _INT64[1]:
            raise Unsure
        return float
    raise Unsure


def _same(a: Any, b: Any) -> bool:
    """CEL equality of two scalars of one class (ints and doubles apart: unsure)."""
    if type(a) is not type(b) and not (a is None and b is None):
        raise Unsure
    _kind(a)
    return bool(a == b)


def _relation(op: str, left: Node, right: Node) -> Node:
    if op == "==":
        return lambda env: _same(left(env), right(env))
    if op == "!=":
        return lambda env: not _same(left(env), right(env))
    if op == "in":
        return lambda env: _contains(right(env), left(env))
    compare: Callable[[Any, Any], bool] = _ORDER[op]

    def ordered(env: dict[str, Any]) -> bool:
        a, b = left(env), right(env)
        kind = _kind(a)
        if kind is not _kind(b) or kind is bool or kind is type(None) or (
                kind is float and not (isfinite(a) and isfinite(b))):
            raise Unsure  # a NaN or an infinity: the bindings' path refuses to order it
        return bool(compare(a, b))
    return ordered


_ORDER: Mapping[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _contains(container: Any, item: Any) -> bool:
    kind = _kind(item)
    if isinstance(container, Mapping):
        if kind is not str:
            raise Unsure
        return item in container
    if type(container) is StringSet:
        if kind is not str:
            raise Unsure
        return item in container
    if type(container) not in (tuple, list):
        raise Unsure
    found = False
    for element in container:
        if _kind(element) is not kind or (kind is float and type(element) is not type(item)):
            raise Unsure
        found = found or element == item
    return found


def _variable(name: str) -> Node:
    def read(env: dict[str, Any]) -> Any:
        try:
            return env[name]
        except KeyError:
            raise Unsure from None
    return read


def _select(target: Node, field: str) -> Node:
    def select(env: dict[str, Any]) -> Any:
        value = target(env)
        if not isinstance(value, Mapping) or field not in value:
            raise Unsure
        return value[field]
    return select


def _index(target: Node, index: Node) -> Node:
    def item(env: dict[str, Any]) -> Any:
        value, key = target(env), index(env)
        if isinstance(value, Mapping) and type(key) is str and key in value:
            return value[key]
        if type(value) in (tuple, list) and type(key) is int and 0 <= key < len(value):
            return value[key]
        raise Unsure
    return item


def _has(target: Node, field: str) -> Node:
    def has(env: dict[str, Any]) -> bool:
        value = target(env)
        if not isinstance(value, Mapping):
            raise Unsure
        return field in value
    return has


def _size(target: Node) -> Node:
    def size(env: dict[str, Any]) -> int:
        value = target(env)
        if type(value) is str:
            return len(value.encode("utf-8", "surrogatepass"))  # the bindings count bytes
        if type(value) in (tuple, list) or isinstance(value, Mapping):
            return len(value)
        raise Unsure
    return size


_STRING_METHODS: Mapping[str, Callable[[str, str], bool]] = {
    "contains": lambda s, part: part in s,
    "startsWith": lambda s, prefix: s.startswith(prefix),
    "endsWith": lambda s, suffix: s.endswith(suffix),
}


def _string_method(run: Callable[[str, str], bool], receiver: Node, arg: Node) -> Node:
    def method(env: dict[str, Any]) -> bool:
        s, other = receiver(env), arg(env)
        if type(s) is not str or type(other) is not str:
            raise Unsure
        return run(s, other)
    return method


def _call(function: Callable[..., Any], args: list[Node]) -> Node:
    def call(env: dict[str, Any]) -> Any:
        values = [arg(env) for arg in args]
        if any(type(v) not in (str, int, float, bool) for v in values):
            raise Unsure
        result = function(*values)
        if type(result) not in (str, bool, int, float, list, tuple):
            raise Unsure  # a sentinel: the function refused its arguments
        return tuple(result) if type(result) is list else result
    return call


def _macro(name: str, receiver: Node, var: str, predicate: Node) -> Node:
    stop = name == "exists"  # exists stops at the first true, all at the first false

    def macro(env: dict[str, Any]) -> bool:
        items = receiver(env)
        if type(items) not in (tuple, list):
            raise Unsure
        missing = object()
        saved = env.get(var, missing)
        try:
            for item in items:
                env[var] = item
                if _bool(predicate(env)) is stop:
                    return stop
            return not stop
        finally:
            if saved is missing:
                env.pop(var, None)
            else:
                env[var] = saved
    return macro


def native_lists(lists: Mapping[str, Any]) -> dict[str, Any]:
    """The policy's named lists as the fast path reads them: a list of strings as a
    :class:`StringSet`, a map list as its entries, any other list as a tuple."""
    out: dict[str, Any] = {}
    for name, value in lists.items():
        if isinstance(value, Mapping):
            out[name] = value
        elif all(type(v) is str for v in value):
            out[name] = StringSet(value)
        else:
            out[name] = tuple(value)
    return out
