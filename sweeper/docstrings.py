"""A docstring that survives `python -OO`: `docstring(module_or_function)` is its `__doc__`, or (docstrings
stripped) the same text read back from its source file. Usage text and the report's rules come through here.

    from sweeper.docstrings import docstring
    USAGE = docstring(sys.modules[__name__]).split("\\n\\n")[0]
"""
from __future__ import annotations

import ast
import inspect


def docstring(obj) -> str:
    """obj.__doc__ as Python gives it without -OO (cleaned as inspect.getdoc does for a module or function);
    "" when the source is missing too."""
    if obj.__doc__ is not None:
        return obj.__doc__
    try:
        tree = ast.parse(inspect.getsource(obj))
    except (OSError, TypeError, SyntaxError):
        return ""
    node = tree if inspect.ismodule(obj) else next(iter(tree.body), None)
    return (ast.get_docstring(node, clean=False) or "") if node is not None else ""
