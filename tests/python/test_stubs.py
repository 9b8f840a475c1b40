"""The .pyi stubs shipped next to the extension name every function and class the module binds."""
import ast
import pathlib

import attnscope

SUBMODULES = ["capacity", "composition", "io", "logits", "model", "stream", "text"]


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
