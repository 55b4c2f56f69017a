"""The GPU check's parts that run anywhere: what it brings along for spaCy, and its parity part on the CPU."""
import configparser
import importlib.metadata
import json

from bench import gpu_check

from ..conftest import DATA

REPO = DATA.parents[1]


def test_the_bundle_declares_the_entry_points_spacy_finds_the_component_by(tmp_path):
    gpu_check._entry_points(tmp_path)
    found = {(ep.group, ep.name, ep.value) for dist in importlib.metadata.distributions(path=[str(tmp_path)])
             for ep in dist.entry_points}
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    declared = {(group, *(part.strip() for part in line.split("=", 1)))
                for group, body in setup["options.entry_points"].items() for line in body.strip().splitlines()}
    assert found == declared and ("spacy_factories", "elmo", "spacy_elmo.pipeline:make_elmo") in found


def test_the_parity_part_compares_both_paths_and_the_published_outputs(tmp_path):
    out = tmp_path / "check.json"
    gpu_check.main(["run", "--device", "cpu", "--quick", "--parts", "parity", "--output", str(out)])
    record = json.loads(out.read_text())
    tiny = record["parts"]["parity"]["models"]["tiny_allennlp"]
    assert record["parts"]["parity"]["status"] == "finished" and record["provenance"]["commit"]
    assert tiny["plain"] == {"batch": 0.0, "one_sentence": 0.0}  # the CPU against itself, bit for bit
    assert 0 < tiny["default"]["batch"] < 1e-5 and max(tiny["against_allennlp"].values()) < 1e-5
