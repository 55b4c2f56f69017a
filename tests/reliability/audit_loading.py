"""Load every kind of model file with an audit hook that records each unpickling.

    python tests/reliability/audit_loading.py MANIFEST.json

MANIFEST.json maps a kind ("pipeline", "native", "allennlp", "component_bytes", "docbin",
"checkpoint", "lm_dir") to the paths to load. Prints one JSON object: {kind: [audit events
seen while loading and running it]}, plus "self_check": the events an ordinary pickle.loads of
a global produces (proof that the hook sees unpickling at all). Python raises the audit event
"pickle.find_class" whenever an unpickler resolves a global, which every code-running pickle
needs; run in a fresh process so that nothing was imported (or cached) before the hook.
"""
import collections
import json
import pickle
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List

WATCHED = ("pickle.find_class",)
events: List[str] = []
recording = [False]


def hook(event: str, args: Any) -> None:
    if recording[0] and event in WATCHED:
        events.append(f"{event} {args!r}"[:200])


def recorded(action: Callable[[], Any]) -> List[str]:
    events.clear()
    recording[0] = True
    try:
        action()
    finally:
        recording[0] = False
    return list(events)


def loaders(manifest: Dict[str, Any]) -> Dict[str, Callable[[], Any]]:
    import spacy
    from spacy.tokens import DocBin

    from spacy_elmo import load_bilm
    from spacy_elmo.io import load_allennlp

    def pipeline() -> None:
        nlp = spacy.load(manifest["pipeline"])
        assert nlp("a small test")._.elmo.layers.shape[1] == 3

    def component_bytes() -> None:
        nlp = spacy.load(manifest["pipeline"])
        nlp.get_pipe("elmo").from_bytes(Path(manifest["component_bytes"]).read_bytes())

    def docbin() -> None:
        nlp = spacy.blank("en")
        docs = list(DocBin().from_bytes(Path(manifest["docbin"]).read_bytes()).get_docs(nlp.vocab))
        assert docs and docs[0]._.elmo is not None

    actions = {
        "pipeline": pipeline,
        "native": lambda: load_bilm(manifest["native"]),
        "allennlp": lambda: load_allennlp(*manifest["allennlp"]),
        "component_bytes": component_bytes,
        "docbin": docbin,
    }
    if "checkpoint" in manifest:
        from spacy_elmo.training.checkpoints import read_checkpoint

        actions["checkpoint"] = lambda: read_checkpoint(Path(manifest["checkpoint"]))
    if "lm_dir" in manifest:
        from spacy_elmo.training.model_dir import load_lm_parts

        actions["lm_dir"] = lambda: load_lm_parts(Path(manifest["lm_dir"]))
    return actions


def main() -> None:
    manifest = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    sys.addaudithook(hook)
    result = {kind: recorded(action) for kind, action in loaders(manifest).items()}
    result["self_check"] = recorded(lambda: pickle.loads(pickle.dumps(collections.OrderedDict())))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
