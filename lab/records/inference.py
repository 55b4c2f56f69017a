"""Which timestep loop a run's inference took: what the lab's benchmarks, parity and reliability
records name beside the machine, so that two numbers are compared only when the same loop ran."""
from pathlib import Path
from typing import Any, Dict

from spacy_elmo.fast import kernel_library


def inference_path() -> Dict[str, Any]:
    """Which timestep loop this process's default (not ``exact``) inference ran: call it after the run.

    RETURNS (Dict[str, Any]): compiled_loop ("loaded": the C++ loop of ``spacy_elmo.fast.compiled``
        ran; "built": built here but not loaded by this process, so the Python lockstep loop ran;
        "switched off": ``SPACY_ELMO_COMPILED=0``; "refused": the file failed its check;
        "failed": it could not be built; "not built"),
        compiled_library (the library's file name, which hashes its sources, torch, the
        compiler and the variant) and kernel_variant (its instruction set, ``kernel_variants.py``).
    """
    state = kernel_library.status()
    if not state["enabled"]:
        loop = "switched off"
    elif state["loaded"]:
        loop = "loaded"
    elif state.get("refused"):
        loop = "refused"
    elif state["failed"]:
        loop = "failed"
    else:
        loop = "built" if state["built"] else "not built"
    return {"compiled_loop": loop, "compiled_library": Path(str(state["library"])).name,
            "kernel_variant": state["variant"]}
