"""A small evaluator of the CEL that the front's own webhook configuration uses in ``matchConditions``
(``deploy/webhooks.yaml``), so that tests check what the API server would decide instead of grepping
the expression text.

Exactly the forms used there: the variables ``object`` and ``oldObject``; field selection ``a.b``; index
``m['k']``; ``has(a.b)``; ``'k' in m``; ``==`` / ``!=``; ``&&`` / ``||``; the conditional ``c ? x : y``;
single-quoted strings and parentheses. As in CEL, selecting a field that is absent (outside ``has``) is
an error, not null — and an error in a matchCondition of a ``failurePolicy: Fail`` webhook refuses the
request, so a test must see it. Anything else is refused as unsupported rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CelError", "evaluate"]


class CelError(Exception):
    """An expression this evaluator refuses, or an evaluation error CEL would raise (no such key)."""


_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*')"
                    r"|(?P<op>&&|\|\||!=|==|[?:.\[\]()])|(?P<id>[A-Za-z_]\w*))")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise CelError(f"unsupported CEL at {pos}: {text[pos:pos + 20]!r}")
        out.append(m.group(m.lastgroup or ""))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


@dataclass(frozen=True)
class _Node:
    kind: str                    # var, str, select, index, has, in, eq, ne, and, or, cond
    args: tuple[Any, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise CelError(f"expected {want or 'a token'}, found {tok!r}")
        self.i += 1
        return tok

    def parse(self) -> _Node:
        node = self.cond()
        if self.peek() is not None:
            raise CelError(f"unexpected {self.peek()!r}")
        return node

    def cond(self) -> _Node:
        test = self.or_()
        if self.peek() != "?":
            return test
        self.take("?")
        yes = self.cond()
        self.take(":")
        return _Node("cond", (test, yes, self.cond()))

    def or_(self) -> _Node:
        node = self.and_()
        while self.peek() == "||":
            self.take()
            node = _Node("or", (node, self.and_()))
        return node

    def and_(self) -> _Node:
        node = self.rel()
        while self.peek() == "&&":
            self.take()
            node = _Node("and", (node, self.rel()))
        return node

    def rel(self) -> _Node:
        node = self.member()
        op = self.peek()
        if op in ("==", "!=", "in"):
            self.take()
            node = _Node({"==": "eq", "!=": "ne", "in": "in"}[op], (node, self.member()))
        return node

    def member(self) -> _Node:
        node = self.primary()
        while self.peek() in (".", "["):
            if self.take() == ".":
                node = _Node("select", (node, self.take()))
            else:
                node = _Node("index", (node, self.cond()))
                self.take("]")
        return node

    def primary(self) -> _Node:
        tok = self.take()
        if tok == "(":
            node = self.cond()
            self.take(")")
            return node
        if tok.startswith("'"):
            return _Node("str", (re.sub(r"\\(.)", r"\1", tok[1:-1]),))
        if tok == "has":
            self.take("(")
            arg = self.member()
            self.take(")")
            if arg.kind != "select":
                raise CelError("has() takes a field selection")
            return _Node("has", arg.args)
        if tok in ("object", "oldObject"):
            return _Node("var", (tok,))
        raise CelError(f"unsupported CEL token {tok!r}")


def _field(value: Any, name: str) -> Any:
    if not isinstance(value, Mapping):
        raise CelError(f"no such key: {name} (not a map)")
    if name not in value:
        raise CelError(f"no such key: {name}")
    return value[name]


def _eval(node: _Node, env: Mapping[str, Any]) -> Any:
    k, a = node.kind, node.args
    if k == "var":
        return env[a[0]]
    if k == "str":
        return a[0]
    if k == "select":
        return _field(_eval(a[0], env), a[1])
    if k == "index":
        return _field(_eval(a[0], env), _eval(a[1], env))
    if k == "has":
        target = _eval(a[0], env)
        if not isinstance(target, Mapping):
            raise CelError(f"has() on a non-map ({a[1]})")
        return a[1] in target
    if k == "in":
        container = _eval(a[1], env)
        if not isinstance(container, Mapping):
            raise CelError("'in' needs a map here")
        return _eval(a[0], env) in container
    if k in ("eq", "ne"):
        left, right = _eval(a[0], env), _eval(a[1], env)
        return (left == right) if k == "eq" else (left != right)
    if k in ("and", "or"):
        left = _bool(_eval(a[0], env))
        if left is (k == "or"):
            return left             # short circuit (CEL's error absorption is wider; not needed here)
        return _bool(_eval(a[1], env))
    test, yes, no = a
    return _eval(yes, env) if _bool(_eval(test, env)) else _eval(no, env)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"expected a bool, got {type(value).__name__}")
    return value


def evaluate(expression: str, *, obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """The value of a matchCondition ``expression`` for an UPDATE of ``old`` into ``obj``; CelError
    when CEL would fail (the API server then refuses the request under ``failurePolicy: Fail``)."""
    return _bool(_eval(_Parser(expression).parse(), {"object": obj, "oldObject": old}))
