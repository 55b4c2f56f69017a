import subprocess
import sys
import textwrap

import numpy as np
import spacy
from thinc.api import Config

from spacy_elmo.io import load_allennlp
from spacy_elmo.layers import get_bilm

TINY_CONFIG = """
[paths]
elmo_options = null
elmo_weights = null

[nlp]
lang = "en"
pipeline = ["sentencizer", "elmo"]

[components]

[components.sentencizer]
factory = "sentencizer"

[components.elmo]
factory = "elmo"
gamma = 2.0

[components.elmo.model]
@architectures = "spacy-elmo.BiLM.v1"
char_embedding_dim = 4
filters = [[1, 4], [2, 4]]
dim = 8
projection_dim = 4
max_window = 7

[initialize]

[initialize.components]

[initialize.components.elmo]
options = ${paths.elmo_options}
weights = ${paths.elmo_weights}
"""

# A fresh interpreter: the factory and the architecture resolve through the entry points alone.
RESOLVE_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import torch
    from spacy.tokens import Doc
    from spacy.util import load_config, load_model_from_config
    torch.set_num_threads(1)
    assert "spacy_elmo" not in sys.modules
    overrides = {"paths.elmo_options": sys.argv[2], "paths.elmo_weights": sys.argv[3]}
    nlp = load_model_from_config(load_config(sys.argv[1], overrides=overrides), auto_fill=True)
    assert "spacy_elmo" in sys.modules
    nlp.initialize()
    doc = nlp(Doc(nlp.vocab, words=sys.argv[4].split(" ")))
    np.save(sys.argv[5], doc._.elmo.layers)
    print(doc._.elmo.gamma, doc._.elmo.segments)
    """
)


def test_default_config_is_the_published_small_shape_and_frozen():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    model = nlp.config["components"]["elmo"]["model"]
    assert model["@architectures"] == "spacy-elmo.BiLM.v1"
    assert (model["dim"], model["projection_dim"], model["n_layers"], model["n_highway"]) == (1024, 128, 2, 1)
    assert sum(n for _, n in model["filters"]) == 2048
    assert model["trainable"] is False and model["max_window"] == 200
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    assert bilm.config.output_dim == 256 and bilm.config.n_filters == 2048


def test_config_string_round_trip():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"max_window": 9, "trainable": True, "batch_size": 3}, "gamma": 0.5})
    config = Config().from_str(nlp.config.to_str())
    rebuilt = spacy.util.load_model_from_config(config, auto_fill=True)
    elmo = rebuilt.get_pipe("elmo")
    assert elmo.model.attrs["max_window"] == 9 and elmo.model.attrs["trainable"] is True
    assert elmo.model.attrs["batch_size"] == 3 and elmo.gamma == 0.5
    assert elmo.bilm.config == nlp.get_pipe("elmo").bilm.config


def test_config_resolves_through_entry_points_only(tiny_paths, tiny_sentences, tmp_path):
    config_path = tmp_path / "config.cfg"
    config_path.write_text(TINY_CONFIG, encoding="utf-8")
    words = tiny_sentences[0] + tiny_sentences[1]
    out = tmp_path / "layers.npy"
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE_SCRIPT, str(config_path), *map(str, tiny_paths), " ".join(words), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # sentencizer boundaries, then windows of at most max_window = 7 tokens
    assert "2.0 ((0, 7), (7, 10), (10, 17), (17, 21))" in result.stdout
    layers = np.load(out)
    assert layers.shape == (3, len(words), 32)
    windows = [words[0:7], words[7:10], words[10:17], words[17:21]]
    expected = np.concatenate(load_allennlp(*tiny_paths).embed(windows), axis=1)
    np.testing.assert_allclose(layers, expected, atol=1e-5)
