"""The package's functions and classes by dotted name, and a call's target found from its
imports: what :mod:`tests.architecture_walk` needs to follow a value from call to callee.

Resolved: names defined in the module or imported (at its top or inside the function,
through re-exports), ``module.name``, ``Class.method``, ``self.method`` (the class and its
bases in the package), and ``name.method`` when ``name`` is a parameter annotated with a
class of the package or was assigned that class's instance in the function. Everything
else (a method of an object of unknown class, ``super()``, a callable passed in, a call
outside the package) is not resolved: the walk does not follow it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class ClassInfo:
    """A class of the package: its methods, its fields (a dataclass's or a model's, for a
    class without ``__init__``) and its bases' expressions."""

    module: str
    name: str
    node: ast.ClassDef
    methods: dict[str, FunctionNode] = field(default_factory=dict)
    fields: list[str] = field(default_factory=list)


@dataclass
class Module:
    """One module: its file, its top-level functions and classes, and its imports
    (alias -> dotted target, a module or ``module.name``)."""

    name: str
    path: Path
    functions: dict[str, FunctionNode] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """A callable of the package: a function, a method (``cls`` set) or a class's
    construction (``node`` its ``__init__``, or None for a class of fields)."""

    module: str
    qualname: str
    node: FunctionNode | None
    cls: ClassInfo | None = None
    bound: bool = False
    """Called on an instance or the class of a classmethod: the first parameter is given."""


def imports_of(nodes: Sequence[ast.AST], package: str) -> dict[str, str]:
    """alias -> dotted target of the import statements among ``nodes`` (anywhere below)."""
    found: dict[str, str] = {}
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    found[alias.asname or alias.name] = f"{base}.{alias.name}"
    return found


def _class_info(module: str, node: ast.ClassDef) -> ClassInfo:
    info = ClassInfo(module, node.name, node)
    for item in node.body:
        if isinstance(item, FunctionNode):
            info.methods[item.name] = item
        elif (
            isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and "ClassVar" not in ast.unparse(item.annotation)
        ):
            info.fields.append(item.target.id)
    return info


class Index:
    """Every module under ``src`` (a directory holding the package), by dotted name."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.modules: dict[str, Module] = {}
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            module = Module(name, path)
            package = name if is_package else name.rpartition(".")[0]
            module.imports = imports_of(
                [
                    n
                    for n in tree.body
                    if isinstance(n, ast.Import | ast.ImportFrom | ast.If | ast.Try)
                ],
                package,
            )
            for node in tree.body:
                if isinstance(node, FunctionNode):
                    module.functions[node.name] = node
                elif isinstance(node, ast.ClassDef):
                    module.classes[node.name] = _class_info(name, node)
            self.modules[name] = module

    def package_of(self, module: str) -> str:
        path = self.modules[module].path
        return module if path.name == "__init__.py" else module.rpartition(".")[0]

    def lookup(self, dotted: str, hops: int = 0) -> Module | ClassInfo | Target | None:
        """What ``dotted`` names in the package: a module, a class or a function (through
        re-exports, a few hops)."""
        if dotted in self.modules:
            return self.modules[dotted]
        owner, _, name = dotted.rpartition(".")
        module = self.modules.get(owner)
        if module is None or hops > 5:
            return None
        if name in module.functions:
            return Target(owner, name, module.functions[name])
        if name in module.classes:
            return module.classes[name]
        if name in module.imports:
            return self.lookup(module.imports[name], hops + 1)
        return None

    def bases(self, cls: ClassInfo) -> list[ClassInfo]:
        """The class and its bases in the package, nearest first."""
        found = [cls]
        module = self.modules[cls.module]
        for base in cls.node.bases:
            name = ast.unparse(base).split("[")[0]
            head, _, rest = name.partition(".")
            dotted = module.imports.get(head, f"{cls.module}.{head}")
            resolved = self.lookup(f"{dotted}.{rest}" if rest else dotted)
            if isinstance(resolved, ClassInfo) and resolved not in found:
                found += self.bases(resolved)
        return found

    def method(self, cls: ClassInfo, name: str, *, bound: bool) -> Target | None:
        for owner in self.bases(cls):
            if name in owner.methods:
                node = owner.methods[name]
                decorators = {ast.unparse(d) for d in node.decorator_list}
                first_given = bound or "classmethod" in decorators
                if "staticmethod" in decorators:
                    first_given = False
                return Target(owner.module, f"{owner.name}.{name}", node, owner, first_given)
        return None

    def construction(self, cls: ClassInfo) -> Target:
        """Calling the class: its ``__init__`` (its own or a base's in the package), or
        the class itself when it has none (its fields are its parameters)."""
        init = self.method(cls, "__init__", bound=True)
        if init is not None:
            return init
        return Target(cls.module, cls.name, None, cls, False)
