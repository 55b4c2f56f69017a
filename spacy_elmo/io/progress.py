"""The progress line of an embedding pass over many sentences (``dump``, the probes' features):
tokens done of the total, tokens/s and ETA, rewritten in place on a terminal, else a line every 10 s."""
import math
import time
from typing import IO

EVERY_S = 10.0  # seconds between lines where the stream is not a terminal


class EmbedProgress:
    """Tokens/s and ETA of one embedding pass.

    total (int): the pass's tokens. label (str): what is embedded. stream: where the line goes.
    quiet (bool): write nothing.
    """

    def __init__(self, total: int, label: str, stream: IO[str], *, quiet: bool = False) -> None:
        self.total, self.label, self.stream, self.quiet = total, label, stream, quiet
        self.done = self.shown = self.resumed = 0
        self.start = self.last = time.monotonic()
        self._tty = hasattr(stream, "isatty") and stream.isatty()
        self._begun = False

    def resume_at(self, tokens: int) -> None:
        """Tokens done before this pass began (a resumed run): counted as done, not in the rate."""
        self.done = self.shown = self.resumed = tokens

    def reached(self, tokens: int) -> None:
        """The pass's tokens done so far; the first call gives where a resumed run starts."""
        if not self._begun:
            self._begun = True
            self.resume_at(tokens)
        else:
            self.advance(tokens - self.done)

    def advance(self, tokens: int) -> None:
        self.done += tokens
        now = time.monotonic()
        if self.quiet or not (self._tty or now - self.last >= EVERY_S):
            return
        self.last, self.shown = now, self.done
        self._write(self.line(now), final=False)

    def close(self) -> None:
        if not self.quiet and (self._tty or self.shown != self.done):
            self._write(self.line(time.monotonic()), final=True)

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = (self.done - self.resumed) / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (
            f"embedding {self.label}: {self.done:,}/{self.total:,} tokens | {rate:,.0f} tok/s"
            f" | elapsed {duration(elapsed)} | ETA {duration(eta)}"
        )

    def _write(self, text: str, *, final: bool) -> None:
        if self._tty:
            self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def duration(seconds: float) -> str:
    """MM:SS (minutes past 99 as they come); "?" for an unknown time."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"
