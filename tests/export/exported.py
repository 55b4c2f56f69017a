"""An exported file ready to run in a test: a TorchScript file is loaded here, where the test trusts
it (it wrote it), since the package loads none itself."""
import json
import warnings
from pathlib import Path

import torch

from spacy_elmo.export import ExportedBiLM, record_path


def run_file(path: Path, **settings) -> ExportedBiLM:
    record = json.loads(record_path(path).read_text(encoding="utf-8"))
    if record["format"] != "torchscript":
        return ExportedBiLM(path, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation notice
        module = torch.jit.load(str(path), map_location="cpu")
    return ExportedBiLM(path, module=module, **settings)
