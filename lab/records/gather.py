"""Record parts only the lab writes: the model and data of a file that gathers runs (a report over
many training runs, an A/B of revisions), and every file of a model directory (for drivers whose
fixtures matter file by file). Both build on the run record of ``spacy_elmo.records.provenance``."""
from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

from spacy_elmo.files import file_sha256
from spacy_elmo.records.provenance import portable_path


def gathered(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The model and data of a file that gathers runs, from the runs' own records.

    records (Sequence[Dict[str, Any]]): the runs' provenance records.
    RETURNS (Dict[str, Any]): model (every distinct model a run used, as a list; null where none
        did), model_note (the runs' notes, where some or all used none) and data (the union of their
        data). A field some run did not record is left out, so that ``check_record`` names it.
    """
    fields: Dict[str, Any] = {}
    if records and all("model" in r for r in records):
        models: List[Any] = []
        for record in records:
            for model in record["model"] if isinstance(record["model"], list) else [record["model"]]:
                if model is not None and model not in models:
                    models.append(model)
        fields["model"] = models or None
        notes = list(dict.fromkeys(r["model_note"] for r in records if r["model"] is None and r.get("model_note")))
        if notes:
            fields["model_note"] = "; ".join(notes)
    if records and all("data" in r for r in records):
        fields["data"] = dict(sorted({k: v for r in records for k, v in r["data"].items()}.items()))
        notes = list(dict.fromkeys(r["data_note"] for r in records if r.get("data_note")))
        if notes and not fields["data"]:
            fields["data_note"] = "; ".join(notes)
    return fields

def model_files(directory: Union[str, Path]) -> Dict[str, Any]:
    """Every file of a model directory with its SHA-256 (beside ``model_record``, for fixtures whose
    every file matters).

    directory (Union[str, Path]): the model's directory (a biLM or a pipeline).
    RETURNS (Dict[str, Any]): path (``portable_path``) and sha256 ({file: hex digest}).
    """
    directory = Path(directory)
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {"path": portable_path(directory), "sha256": {p.relative_to(directory).as_posix(): file_sha256(p) for p in files}}
