"""How a number a document derives from a record follows from the record's fields: the expression
after ``<!-- =`` in ``1,410<!-- = tokens / seconds --> tokens/s``, evaluated by ``lab.records.citations``
over each JSON record the number's block cites. Only arithmetic on the record's numbers: nothing is
called or imported."""
import ast
import operator
from typing import Any, Optional

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def derive(expression: str, data: Any) -> Optional[float]:
    """The value of a derivation over a JSON record: ``+ - * /``, parentheses, numbers, the record's
    fields by path (``tokens / seconds``, ``tasks[0].scores["layer 1"]``) and ``sum(FIELD)`` of a
    map's or list's numbers.

    expression (str): the derivation. data (Any): the record's JSON.
    RETURNS (Optional[float]): its value; None where a field is missing or not a number.
    """
    def field(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            return data[node.id]
        if isinstance(node, ast.Attribute):
            return field(node.value)[node.attr]
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return field(node.value)[node.slice.value]
        raise ValueError(f"not a field: {ast.unparse(node)}")

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "sum" and len(node.args) == 1 and not node.keywords:
            items = field(node.args[0])
            return sum(_number(v) for v in (items.values() if isinstance(items, dict) else items))
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            return _number(field(node))
        raise ValueError(f"not a derivation: {expression!r}")

    try:
        return value(ast.parse(expression, mode="eval"))
    except (KeyError, TypeError, IndexError, ValueError, ZeroDivisionError, SyntaxError):
        return None


def _number(item: Any) -> float:
    if isinstance(item, bool) or not isinstance(item, (int, float)):
        raise TypeError(repr(item))
    return float(item)
