"""The check every results file of this repository is held to (``tests/lab/records/test_results_records.py``):
the run record that ``spacy_elmo.records.provenance`` writes is complete, and no string in the file holds a
machine path.
"""
import datetime
import re
from typing import Any, Dict, List, Optional

# when this record schema came in (its commit): records written from then on carry every field with a
# value, no null and no ``unknown``
SCHEMA_DATE = "2026-12-02T06:34:41+00:00"
REQUIRED_FIELDS = (
    "command", "start_commit", "start_clean", "started", "model", "data",
    "cpu", "cpu_flags", "cpu_capability", "cpu_count", "torch_threads", "python", "torch", "spacy_elmo", "date",
)
MODEL_FIELDS = ("name", "version", "weights", "weights_sha256")


def check_record(results: Any) -> List[str]:
    """What a results file lacks: ``tests/lab/records/test_results_records.py`` holds every results JSON to it.

    results (Any): the file's JSON. Its top-level ``provenance`` needs every ``REQUIRED_FIELDS``
        entry; ``model`` a ``model_record`` (or a list of them) with every ``MODEL_FIELDS`` entry, or
        null with ``model_note``; ``data`` {path: SHA-256}, or ``{}`` with ``data_note``. A null is
        accepted only in a record dated before ``SCHEMA_DATE`` (``date``, or where that is unknown
        ``written_before``) whose ``unknown`` says why. A run from a tree with uncommitted changes
        (``is_dirty``) needs ``dirty_note`` saying what they were. No string anywhere in the file may hold an
        absolute machine path (or one that climbs out of the checkout).
    RETURNS (List[str]): the problems, each naming its field; empty when the file passes.
    """
    problems = [f"{where}: a machine path ({value!r:.120})" for where, value in machine_paths(results)]
    record = results.get("provenance") if isinstance(results, dict) else None
    if not isinstance(record, dict):
        return problems + ["provenance: missing (the record belongs at the top level)"]
    unknown = record.get("unknown") or {}
    dated = record.get("date") or record.get("written_before")
    old = isinstance(dated, str) and _parse_date(dated) is not None and _parse_date(dated) < _parse_date(SCHEMA_DATE)
    if unknown and not old:
        problems.append(f"provenance.unknown: only a record written before {SCHEMA_DATE} may leave fields unknown")

    def null(field: str, what: str) -> None:
        if not old:
            problems.append(f"provenance.{what}: null (a record dated from {SCHEMA_DATE} on has every value)")
        elif not unknown.get(field):
            problems.append(f"provenance.{what}: null, and provenance.unknown does not say why")

    for field in REQUIRED_FIELDS:
        if field not in record:
            problems.append(f"provenance.{field}: missing")
        elif record[field] is None and field != "model":
            null(field, field)
    if "model" in record:
        models = record["model"] if isinstance(record["model"], list) else [record["model"]]
        if record["model"] is None:
            if not record.get("model_note") and not (old and unknown.get("model")):
                problems.append("provenance.model: null without a model_note saying why")
        elif not models or not all(isinstance(m, dict) for m in models):
            problems.append("provenance.model: neither a model record, a list of them, nor null")
        else:
            for i, item in enumerate(models):
                label = "model" if len(models) == 1 and not isinstance(record["model"], list) else f"model[{i}]"
                for key in MODEL_FIELDS:
                    if key not in item:
                        problems.append(f"provenance.{label}.{key}: missing")
                    elif item[key] is None:
                        null("model", f"{label}.{key}")
                digest = item.get("weights_sha256")
                if digest is not None and not _is_digest(digest):
                    problems.append(f"provenance.{label}.weights_sha256: not a SHA-256 ({digest!r})")
    if record.get("data") is not None:
        data = record["data"]
        if not isinstance(data, dict):
            problems.append("provenance.data: not a {path: SHA-256} map")
        elif not data and not record.get("data_note"):
            problems.append("provenance.data: empty without a data_note saying why")
        else:
            for path, digest in data.items():
                if digest is None:
                    null("data", f"data[{path}]")
                elif not _is_digest(digest):
                    problems.append(f"provenance.data[{path}]: not a SHA-256 ({digest!r})")
    if is_dirty(record) and not record.get("dirty_note"):
        problems.append("provenance.dirty_note: missing (the run's tree had uncommitted changes: say what they were "
                        "and why the numbers stand)")
    for field in unknown:
        if field in record and record[field] is not None and field not in ("model", "data"):
            problems.append(f"provenance.unknown.{field}: the field has a value")
    return problems


def is_dirty(record: Dict[str, Any]) -> bool:
    """Whether a run started from a tree with uncommitted changes (tracked files other than the results).

    record (Dict[str, Any]): a provenance record. Where its start was not recorded (``start_clean``
        null), the tree when the record was written (``dirty``) stands in for it.
    RETURNS (bool): True where the record says the tree was dirty.
    """
    if record.get("start_clean") is not None:
        return record["start_clean"] is False
    return record.get("dirty") is True


# a path at the start of a word (or after = : , ( [ or a quote): absolute, home, Windows, or climbing out
# a shortened path (".../NAME") must not start at a machine's root or scratch folder either
_MACHINE_PATH = re.compile(
    r"(?:^|[\s=:,(\['\"])(?:/[A-Za-z0-9_.~-]|~/|[A-Za-z]:[\\/]|\.\./|\.\.\./(?:/|tmp/|root/|home/|work/|mnt/|opt/|srv/))"
)


def machine_paths(value: Any, where: str = "") -> List[tuple]:
    """RETURNS (List[tuple]): (location, string) for every string in ``value`` (keys included) that
    holds an absolute path, a home directory or a path climbing out of the checkout."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and _MACHINE_PATH.search(key):
                found.append((here, key))
            found += machine_paths(item, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += machine_paths(item, f"{where}[{i}]")
    elif isinstance(value, str) and _MACHINE_PATH.search(value):
        found.append((where or "(top)", value))
    return found


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) is not None


def _parse_date(text: str) -> Optional[datetime.datetime]:
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)
