"""The error raised for any file that cannot be read as a model."""
from pathlib import Path
from typing import Union


class ModelFileError(ValueError):
    """A model file is missing, damaged, or does not match its configuration.

    path (Union[str, Path]): the file at fault.
    problem (str): what is wrong and, where possible, what to do.
    """

    def __init__(self, path: Union[str, Path], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
