"""A value followed statically through the package: from a function's parameter into every
function of the package it is passed to, as enter and return events, depth first.

The rules (docs/architecture.md, "The settings walk"): the value flows through names
assigned from it and expressions made from it (``settings.x``, ``settings.x or y``,
``settings.dir / "f"``, ``str(settings.x)``, a method of it, ``self.x`` assigned it); a
call of the package given it (a positional or keyword argument, ``*``/``**`` of it) is
followed into the callee's parameters that receive it. What such a call returns is a part
built from the value, not the value: it is not followed. An error raised with the value in
its message is not followed either (it reports the value, it wires nothing). A function
already on the walk's stack is not entered again. How targets are found:
:mod:`tests.walk_index`.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from tests.walk_index import ClassInfo, FunctionNode, Index, Module, Target, imports_of

__all__ = ["Event", "Walk", "receiving"]

PACKAGE = "persona_agent"


@dataclass(frozen=True)
class Event:
    """Entering a function of ``file`` (a path below ``src/persona_agent``) or returning
    from it; ``depth`` 0 is the walk's start."""

    kind: Literal["enter", "return"]
    file: str
    function: str
    depth: int


class _Cut(Exception):
    """The walk reached its count of events."""


@dataclass
class Walk:
    """Follows a value through the package of ``index``; :attr:`events` is the walk."""

    index: Index
    max_events: int = 400
    events: list[Event] = field(default_factory=list)
    unresolved: Counter[str] = field(default_factory=Counter)
    cut: bool = False
    _stack: list[tuple[str, str]] = field(default_factory=list)

    def run(self, module: str, qualname: str, parameter: str) -> None:
        """Walk from ``parameter`` of ``qualname`` (a function, or ``Class.method``) of
        ``module``; :attr:`cut` tells whether :attr:`max_events` stopped it."""
        owner, _, name = qualname.rpartition(".")
        found = self.index.lookup(f"{module}.{owner}" if owner else f"{module}.{name}")
        if owner and isinstance(found, ClassInfo):
            start = self.index.method(found, name, bound=True)
        else:
            start = found if isinstance(found, Target) else None
        if start is None or start.node is None:
            raise SystemExit(f"{module}: no function {qualname}")
        if parameter not in _parameters(start)[0] + _parameters(start)[1]:
            raise SystemExit(f"{module}.{qualname} has no parameter {parameter!r}")
        try:
            self.enter(start, {parameter})
        except _Cut:
            self.cut = True

    def enter(self, target: Target, tainted: set[str]) -> None:
        """Enter ``target`` with its parameters ``tainted`` carrying the value, walk its
        body, return (unless it is on the stack already)."""
        key = (target.module, target.qualname)
        if key in self._stack:
            return
        depth = len(self._stack)
        self._emit("enter", target, depth)
        if target.node is not None:
            self._stack.append(key)
            _Body(self, target, tainted).walk()
            self._stack.pop()
        self._emit("return", target, depth)

    def _emit(self, kind: Literal["enter", "return"], target: Target, depth: int) -> None:
        if len(self.events) >= self.max_events:
            raise _Cut
        path = self.index.modules[target.module].path
        file = path.relative_to(self.index.src / PACKAGE).as_posix()
        self.events.append(Event(kind, file, f"{target.module}.{target.qualname}", depth))


def _bound(target: ast.expr) -> list[str]:
    """The names an assignment to ``target`` binds: names, and ``self.x`` attributes."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return [ast.unparse(target)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _bound(element)]
    return []


def _parameters(target: Target) -> tuple[list[str], list[str], str | None, str | None]:
    """(positional parameters, keyword-only ones, ``*args``, ``**kwargs``) of ``target``
    as its callers see them (a bound method without its first)."""
    if target.node is None:
        assert target.cls is not None
        return list(target.cls.fields), [], None, None
    args = target.node.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    if target.bound:
        positional = positional[1:]
    return (
        positional,
        [a.arg for a in args.kwonlyargs],
        args.vararg.arg if args.vararg else None,
        args.kwarg.arg if args.kwarg else None,
    )


def receiving(target: Target, call: ast.Call, derived: list[bool]) -> set[str]:
    """The parameters of ``target`` that ``call`` gives the value to; ``derived``: for
    each positional argument, then each keyword, whether it carries the value."""
    positional, keyword_only, varargs, kwargs = _parameters(target)
    found: set[str] = set()
    for i, argument in enumerate(call.args):
        if not derived[i]:
            continue
        if isinstance(argument, ast.Starred):
            found.update(positional[i:])
            found.update([varargs] if varargs else [])
        elif i < len(positional):
            found.add(positional[i])
        elif varargs:
            found.add(varargs)
    for keyword, carries in zip(call.keywords, derived[len(call.args) :], strict=True):
        if not carries:
            continue
        if keyword.arg is None:
            found.update([*positional, *keyword_only, *([kwargs] if kwargs else [])])
        elif keyword.arg in positional or keyword.arg in keyword_only:
            found.add(keyword.arg)
        elif kwargs:
            found.add(kwargs)
    return found


class _Body(ast.NodeVisitor):
    """One function's body walked in evaluation order: which names carry the value, and
    each call of the package that is given it."""

    def __init__(self, walk: Walk, target: Target, tainted: set[str]) -> None:
        assert target.node is not None
        self.owner, self.index, self.target = walk, walk.index, target
        self.node: FunctionNode = target.node
        self.module: Module = self.index.modules[target.module]
        self.imports = imports_of(list(self.node.body), self.index.package_of(target.module))
        self.tainted = set(tainted)
        self.types: dict[str, ClassInfo] = {}
        args = self.node.args
        for argument in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if argument.annotation is not None:
                self._type(argument.arg, argument.annotation)

    def walk(self) -> None:
        for statement in self.node.body:
            self.visit(statement)

    # What a name or an expression stands for.

    def _dotted(self, name: str) -> str:
        head, _, rest = name.partition(".")
        base = self.imports.get(head) or self.module.imports.get(head)
        if base is None:
            base = f"{self.module.name}.{head}"
        return f"{base}.{rest}" if rest else base

    def _type(self, name: str, annotation: ast.expr) -> None:
        text = ast.unparse(annotation).strip("'\"")
        for part in text.replace("|", " ").replace("[", " ").replace("]", " ").split():
            found = self.index.lookup(self._dotted(part.strip(",")))
            if isinstance(found, ClassInfo):
                self.types[name] = found
                return

    def resolve(self, func: ast.expr) -> Target | None:
        """The function of the package ``func`` calls, or None (see :mod:`tests.walk_index`)."""
        if isinstance(func, ast.Name) and func.id == "cls" and self.target.cls is not None:
            return self.index.construction(self.target.cls)  # a classmethod's own class
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            receiver = func.value.id
            cls = self.target.cls if receiver in ("self", "cls") else self.types.get(receiver)
            if cls is not None:
                return self.index.method(cls, func.attr, bound=True)
        text = ast.unparse(func)
        if not all(part.isidentifier() for part in text.split(".")):
            return None
        dotted = self._dotted(text)
        found = self.index.lookup(dotted)
        if found is None and "." in dotted:
            owner, _, name = dotted.rpartition(".")
            owner_class = self.index.lookup(owner)
            if isinstance(owner_class, ClassInfo):
                return self.index.method(owner_class, name, bound=False)
        if isinstance(found, ClassInfo):
            return self.index.construction(found)
        return found if isinstance(found, Target) else None

    def derived(self, node: ast.AST | None) -> bool:
        """Whether ``node`` carries the value: a name of it, or an expression made from
        one that is not a call of the package (whose result is a part, not the value)."""
        if node is None:
            return False
        if isinstance(node, ast.Name):
            return node.id in self.tainted
        if isinstance(node, ast.Attribute) and ast.unparse(node) in self.tainted:
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and self.derived(func.value):
                return True  # a method of the value: still the value
            if self.resolve(func) is not None:
                return False
            return any(self.derived(a) for a in [*node.args, *node.keywords])
        if isinstance(node, ast.Lambda | FunctionNode):
            return False
        return any(self.derived(child) for child in ast.iter_child_nodes(node))

    def _bind(self, target: ast.expr, carries: bool, value: ast.expr | None = None) -> None:
        """Names of ``target`` (and ``self.x`` targets) carry the value or stop carrying
        it; a name given an instance of a class of the package has that class (for its
        methods' calls)."""
        for node in _bound(target):
            (self.tainted.add if carries else self.tainted.discard)(node)
        if isinstance(target, ast.Name) and isinstance(value, ast.Call):
            text = ast.unparse(value.func)
            if all(part.isidentifier() for part in text.split(".")):
                found = self.index.lookup(self._dotted(text))
                if isinstance(found, ClassInfo):
                    self.types[target.id] = found

    # The statements and expressions that bind names, then the calls.

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind(target, self.derived(node.value), node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, self.derived(node.value), node.value)
        if isinstance(node.target, ast.Name):
            self._type(node.target.id, node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if self.derived(node.value):
            self._bind(node.target, True)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, self.derived(node.value), node.value)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._bind(node.target, self.derived(node.iter))
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, self.derived(item.context_expr))
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        with self._scope([]):
            for generator in node.generators:
                self.visit(generator.iter)
                self._bind(generator.target, self.derived(generator.iter))
                for condition in generator.ifs:
                    self.visit(condition)
            self.visit(node.elt)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = _comprehension

    def visit_DictComp(self, node: ast.DictComp) -> None:
        with self._scope([]):
            for generator in node.generators:
                self.visit(generator.iter)
                self._bind(generator.target, self.derived(generator.iter))
            self.visit(node.key)
            self.visit(node.value)

    @contextmanager
    def _scope(self, shadowing: list[str]) -> Iterator[None]:
        """An inner scope (a closure, a comprehension): its own names shadow the value's."""
        saved = set(self.tainted)
        self.tainted.difference_update(shadowing)
        yield
        self.tainted = saved

    def visit_FunctionDef(self, node: FunctionNode | ast.Lambda) -> None:
        """A closure: its body runs with the names it closes over (its own shadow them)."""
        args = node.args
        names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        with self._scope(names):
            for child in node.body if isinstance(node.body, list) else [node.body]:
                self.visit(child)

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Raise(self, node: ast.Raise) -> None:
        """An error raised with the value in its message reports it, it wires nothing:
        the error's construction is not followed (calls inside its arguments are)."""
        if isinstance(node.exc, ast.Call):
            self.generic_visit(node.exc)
        elif node.exc is not None:
            self.visit(node.exc)
        if node.cause is not None:
            self.visit(node.cause)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        derived = [self.derived(a) for a in node.args]
        derived += [self.derived(k.value) for k in node.keywords]
        if not any(derived):
            return
        target = self.resolve(node.func)
        if target is None:
            self._unresolved(node.func)
            return
        given = receiving(target, node, derived)
        if given:
            self.owner.enter(target, given)

    def _unresolved(self, func: ast.expr) -> None:
        """Count a call given the value that the walk cannot follow, unless it is plainly
        outside the package: a builtin, an imported outside name, a method a class of the
        package inherits from outside it (``Model.model_validate``)."""
        text = ast.unparse(func)
        head = text.split(".")[0]
        if not head.isidentifier() or head in dir(builtins):
            return
        outside = self.imports.get(head) or self.module.imports.get(head)
        if outside is not None and not outside.startswith(PACKAGE + "."):
            return
        if "." in text and isinstance(self.index.lookup(self._dotted(head)), ClassInfo):
            return
        self.owner.unresolved[text] += 1
