"""Who may write what the kernel library loads: a library runs its code in every process that
loads it, so it is loaded only where no one else could have put it there (``kernel_library``).

A folder of kernels built here answers to ``exposure`` (as ssh's checks of ``~/.ssh``); the
platform wheel's prebuilt folder to ``prebuilt_exposure``, held to the package code that loads it.
"""
import os
import stat
import sys
from pathlib import Path
from typing import Optional, Sequence

DIR_ENV = "SPACY_ELMO_KERNELS"  # where built kernels go (default: the cache's kernels/)


def exposure(folder: Path, files: Sequence[Path] = ()) -> Optional[str]:
    """Why someone other than this user (or root) could replace what is loaded from ``folder``,
    or None. Like ssh's checks of ``~/.ssh``: ``folder`` and ``files`` must belong to this user or
    root and be writable by no one else; each folder above must belong to them too and, if others
    may write to it, be sticky (as ``/tmp``), so that no one else can rename what it holds.

    folder (Path): the kernel folder.
    files (Sequence[Path]): files in it to check too; those that do not exist are left out.
    RETURNS (Optional[str]): the reason, with the path, its mode and what to do.
    """
    if not hasattr(os, "getuid"):
        return f"file ownership is not checked on {sys.platform}"
    folder = folder.resolve()
    trusted = (os.getuid(), 0)
    for path in [*(f for f in files if f.exists()), folder, *folder.parents]:
        info = path.stat()
        mode = stat.S_IMODE(info.st_mode)
        shared = path in folder.parents and info.st_mode & stat.S_ISVTX
        if info.st_uid not in trusted:
            return (f"{path} belongs to another user (uid {info.st_uid}); set ${DIR_ENV} to a folder of "
                    "your own and run `python -m spacy_elmo kernels --build`")
        if mode & 0o022 and not shared:
            return (f"{path} may be written by others (mode {mode:o}); `chmod go-w {path}`, or set "
                    f"${DIR_ENV} to a private folder and run `python -m spacy_elmo kernels --build`")
    return None


def prebuilt_exposure(folder: Path, files: Sequence[Path], code: Sequence[Path]) -> Optional[str]:
    """Why someone who may not change this package's own code could replace what is loaded from
    the wheel's prebuilt ``folder``, or None. ``exposure``'s rules, held to the code that loads it
    (``code``: the module that loads it and its folder) rather than to no one: the folder and ``files`` may also
    belong to the code's owner (a venv another account installed), and be writable by the code's
    group where the code is (pip under umask 002 installs both so); never by all. The folders
    above that hold the code are not checked again: Python runs the code from them already.

    RETURNS (Optional[str]): the reason, with the path, its mode and what to do.
    """
    if not hasattr(os, "getuid"):
        return exposure(folder, files)
    module, home = code
    code_stats = [module.stat(), home.stat()]
    owners = {os.getuid(), 0, *(info.st_uid for info in code_stats)}
    groups = {info.st_gid for info in code_stats if info.st_mode & stat.S_IWGRP}
    folder = folder.resolve()
    held = {home, *home.parents}
    for path in [*(f for f in files if f.exists()), folder]:
        info = path.stat()
        mode = stat.S_IMODE(info.st_mode)
        if info.st_uid not in owners:
            return (f"{path} belongs to another user (uid {info.st_uid}) than spacy-elmo's own code; "
                    f"reinstall spacy-elmo, or set ${DIR_ENV} to a folder of your own and run "
                    "`python -m spacy_elmo kernels --build`")
        if mode & stat.S_IWOTH or (mode & stat.S_IWGRP and info.st_gid not in groups):
            return (f"{path} may be written by others than those who may change spacy-elmo's own code "
                    f"(mode {mode:o}); `chmod go-w {path}`")
    above = [p for p in folder.parents if p not in held]
    return exposure(above[0], []) if above else None
