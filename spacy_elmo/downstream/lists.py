"""The lists the downstream commands take: comma-separated on the command line, sequences in Python."""
from typing import Callable, List, Sequence, TypeVar, Union

T = TypeVar("T")


def comma_list(value: Union[str, Sequence[T]], kind: Callable[[str], T] = str) -> List[T]:  # type: ignore[assignment]
    """A comma-separated list as the commands take it ("1,10, 100"), or a sequence as it is.

    kind (Callable[[str], T]): what each item of a string is read as (str, int, float).
    RETURNS (List[T]): the items, empty ones dropped.
    """
    if not isinstance(value, str):
        return list(value)
    return [kind(item.strip()) for item in value.split(",") if item.strip()]
