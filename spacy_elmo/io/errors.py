"""The errors raised for a file that cannot be read as a model, or downloaded as one."""
import re
from pathlib import Path
from typing import Sequence, Tuple, Union


class ModelFileError(ValueError):
    """A model file is missing, damaged, or does not match its configuration.

    path (Union[str, Path]): the file at fault.
    problem (str): what is wrong and, where possible, what to do.
    """

    def __init__(self, path: Union[str, Path], problem: str) -> None:
        self.path = str(path)
        # one line, whatever a library's reason quoted in it spans
        self.problem = re.sub(r"\s*\n\s*", " ", problem.strip())
        super().__init__(f"{self.path}: {self.problem}")


class DownloadError(ModelFileError):
    """A published model file could not be downloaded, or what arrived is not the file.

    url (str): where the file was fetched from.
    path (Union[str, Path]): where the file belongs; placing a copy there by hand also works.
    reason (str): what went wrong.
    also (Sequence[Tuple[str, Union[str, Path]]]): other (url, path) pairs still to be placed.
    """

    def __init__(
        self, url: str, path: Union[str, Path], reason: str, *, also: Sequence[Tuple[str, Union[str, Path]]] = ()
    ) -> None:
        self.url = url
        self.reason = reason
        by_hand = "; ".join(f"{u} -> {p}" for u, p in [(url, path), *also])
        super().__init__(
            path,
            f"{reason}; nothing was put in place. Without network, download elsewhere and copy into "
            f"place (checked on first use): {by_hand}",
        )
