"""A per-thread switch with a context manager: how a block of code asks for a reference path
(the Python timestep loop, the op-by-op training loop) without touching other threads."""
import threading
from contextlib import contextmanager
from typing import Iterator


class ThreadSwitch:
    """Off by default in every thread; ``with switch.on():`` turns it on in this thread meanwhile."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def active(self) -> bool:
        return getattr(self._local, "on", False)

    @contextmanager
    def on(self) -> Iterator[None]:
        before = self.active
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = before
