"""The .pyi stubs shipped next to the extension name every function and class the module binds."""
import ast
import pathlib
import re

import pytest

import attnscope

STUBTEST_CONFIG = pathlib.Path(__file__).with_name("stubtest.ini")
STUBTEST_ALLOWLIST = pathlib.Path(__file__).with_name("stubtest_allowlist.txt")

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


def split_parameters(text):
    """Splits pybind11's parameter list at the commas outside brackets, parentheses, <...> and quotes."""
    parts, depth, quote, current = [], 0, None, ""
    for c in text:
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += c
    if current.strip():
        parts.append(current.strip())
    return parts


def runtime_signatures(name, obj):
    """The signatures pybind11 wrote into the docstring: one (names, keyword-only names, names with a default) per
    overload, `self` dropped."""
    pattern = re.compile(r"^(?:\d+\. )?" + re.escape(name) + r"\((.*)\) -> ")
    signatures = []
    for line in (obj.__doc__ or "").splitlines():
        match = pattern.match(line)
        if not match:
            continue
        names, keyword_only, defaults, star = [], set(), set(), False
        for part in split_parameters(match.group(1)):
            if part == "*":
                star = True
                continue
            parameter = part.split(":")[0].split("=")[0].strip()
            if parameter == "self":
                continue
            names.append(parameter)
            if star:
                keyword_only.add(parameter)
            if "=" in part:
                defaults.add(parameter)
        signatures.append((names, keyword_only, defaults))
    return signatures


def stub_signature(node):
    arguments = node.args
    positional = [a.arg for a in arguments.posonlyargs + arguments.args]
    defaults = set(positional[len(positional) - len(arguments.defaults):]) if arguments.defaults else set()
    keyword_only = [a.arg for a in arguments.kwonlyargs]
    defaults |= {a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None}
    names = [n for n in positional + keyword_only if n != "self"]
    return names, set(keyword_only), defaults - {"self"}


def stub_functions(tree):
    """(qualified name, function node) for the module's functions and its classes' methods (properties skipped)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not any(
                        getattr(d, "id", getattr(d, "attr", None)) in ("property", "setter") for d in item.decorator_list):
                    yield item.name, node.name, item


def test_stub_signatures_match_the_bindings():
    """Parameter names, their order, keyword-only parameters and which have defaults agree between every stub and
    the signature pybind11 records for the binding (stubtest cannot read the signatures of extension functions)."""
    package = pathlib.Path(attnscope.__file__).parent
    mismatches = []
    checked = 0
    for module_name in [None] + SUBMODULES:
        module = attnscope._attnscope if module_name is None else getattr(attnscope, module_name)
        tree = ast.parse((package / f"{module_name or '__init__'}.pyi").read_text())
        for name, class_name, node in stub_functions(tree):
            owner = module if class_name is None else getattr(module, class_name, None)
            obj = getattr(owner, name, None)
            if obj is None or name.startswith("__") and name != "__init__":
                continue
            runtime = runtime_signatures(name, obj)
            if not runtime:
                continue
            checked += 1
            if stub_signature(node) not in runtime:
                where = f"{module_name or 'attnscope'}.{class_name + '.' if class_name else ''}{name}"
                mismatches.append(f"{where}: stub {stub_signature(node)} vs runtime {runtime}")
    assert checked > 150
    assert not mismatches, "\n".join(mismatches)


def test_stubtest_accepts_the_stubs(tmp_path):
    """mypy's stubtest compares the stubs with the module at run time: every name, class and member, and the
    signatures of the pure-Python parts (attnscope.results). Skipped without mypy (Debian: python3-mypy)."""
    import os
    import subprocess
    import sys

    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (Debian: apt-get install python3-mypy); stubtest not run")
    package = pathlib.Path(attnscope.__file__).parent
    environment = dict(os.environ)
    if package.parent.name not in ("site-packages", "dist-packages"):  # a build folder: show mypy where it is
        environment["MYPYPATH"] = str(package.parent)  # (an installed package is found through its py.typed)
    # The classes pybind11 creates differ from the stubs' classes only by their metaclass (pybind11_type): allowed
    # by exact name, so that their members are still compared and a class missing at run time is still reported.
    pybind11_classes = tmp_path / "pybind11_classes.txt"
    names = []
    for module_name in [None] + SUBMODULES:
        module = attnscope._attnscope if module_name is None else getattr(attnscope, module_name)
        prefix = "attnscope." + (module_name + "." if module_name else "")
        names += [re.escape(prefix + name) for name, value in vars(module).items()
                  if isinstance(value, type) and type(value).__name__ == "pybind11_type"]
    pybind11_classes.write_text("\n".join(names) + "\n")
    result = subprocess.run([sys.executable, "-m", "mypy.stubtest", "attnscope", "--mypy-config-file",
                             str(STUBTEST_CONFIG), "--allowlist", str(STUBTEST_ALLOWLIST), "--allowlist",
                             str(pybind11_classes)],
                            capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
