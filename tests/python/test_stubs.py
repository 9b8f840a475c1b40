"""The .pyi stubs shipped next to the extension name every function and class the module binds."""
import ast
import re
import pathlib

import attnscope

SUBMODULES = ["analysis", "capacity", "composition", "io", "logits", "model", "stream", "text"]


def stub_names(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def public_names(module):
    return {name for name in dir(module) if not name.startswith("__") and not isinstance(getattr(module, name),
                                                                                         type(attnscope))}


def test_stubs_cover_the_module():
    package = pathlib.Path(attnscope.__file__).parent
    assert (package / "py.typed").exists()
    top = stub_names(package / "__init__.pyi")
    missing = public_names(attnscope._attnscope) - top
    assert not missing, f"__init__.pyi lacks {sorted(missing)}"
    for name in SUBMODULES:
        names = stub_names(package / f"{name}.pyi")
        missing = public_names(getattr(attnscope, name)) - names
        assert not missing, f"{name}.pyi lacks {sorted(missing)}"


def documented(name, obj):
    """True when the docstring says more than pybind11's generated signature line(s)."""
    lines = [line for line in (obj.__doc__ or "").splitlines() if line.strip()]
    signature = re.compile(r"^(\d+\. )?" + re.escape(name) + r"\(")
    return any(not signature.match(line) and "Overloaded function" not in line for line in lines)


def test_every_function_and_method_has_a_docstring():
    import inspect

    undocumented = []
    modules = [attnscope._attnscope] + [getattr(attnscope, name) for name in SUBMODULES]
    for module in modules:
        for name in dir(module):
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            if not documented(name, obj):
                undocumented.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") or not callable(getattr(obj, member)):
                        continue
                    if not documented(member, getattr(obj, member)):
                        undocumented.append(f"{module.__name__}.{name}.{member}")
    assert not undocumented, undocumented
