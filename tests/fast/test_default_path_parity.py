"""The default path, as users run it, on long sentences and deep stacks: within 1e-5 of the exact math.

A published-format model (options.json + HDF5) of 3 and 4 LSTM layers with active clips goes
through ``convert`` into a pipeline, ``spacy.load`` runs it with its default settings (the
optimized path: the compiled timestep loop where this CPU builds it, else the Python lockstep
loop), and a sentence of ``max_window`` tokens comes out within 1e-5 of the same model run in
float64 by the reference loop. The plain float32 reference path is held to the same bound, and so
is every other inference path of the dispatch. The weights are random but not chaotic: the
recurrent ones are small enough that rounding differences shrink over time (as in the published
models), while large input weights keep a third of the outputs at their clip.
"""
import numpy as np
import pytest
import spacy
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig, batch_char_ids
from spacy_elmo.fast import compiled, optimize_for_inference, python_step
from spacy_elmo.io import export_allennlp, load_allennlp
from spacy_elmo.layers import get_bilm
from spacy_elmo.pipeline import create_pipeline

WORDS = "the bank raised its rates while we sat on the river bank all afternoon and talked of money .".split()
MAX_WINDOW = 200  # the component's default
CONTRACT = 1e-5


def published_model(tmp_path, n_layers, seed):
    config = BiLMConfig(
        char_embedding_dim=8, filters=((1, 4), (2, 6), (4, 10)), n_highway=1, dim=48, projection_dim=12,
        n_layers=n_layers, cell_clip=1.0, proj_clip=0.5,
    )
    torch.manual_seed(seed)
    bilm = BiLM(config)
    scales = {"input_linearity": 3.0, "state_linearity": 0.6, "projection": 1.5}
    with torch.no_grad():
        for name, param in bilm.named_parameters():
            kind = next((k for k in scales if f".{k}." in name), None)
            if "lstm" in name and kind is not None and param.dim() == 2:
                param.normal_(0, scales[kind] / param.shape[1] ** 0.5)
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    export_allennlp(bilm, options, weights)
    return options, weights


def sentence(seed):
    rng = np.random.default_rng(seed)
    return [WORDS[i] for i in rng.integers(0, len(WORDS), MAX_WINDOW)]


def float64_layers(options, weights, words):
    """The reference loop in float64: the exact math, to float32's precision and beyond."""
    reference = load_allennlp(options, weights).double()
    ids, lengths = batch_char_ids([words])
    with torch.no_grad():
        layers = reference(torch.from_numpy(ids), torch.from_numpy(lengths)).layers
    return layers[:, 0, 1 : len(words) + 1].numpy()


@pytest.mark.parametrize("n_layers,seed", [(3, 0), (4, 1)])
def test_the_default_pipeline_meets_the_contract_on_a_full_window_and_a_deep_stack(tmp_path, n_layers, seed):
    options, weights = published_model(tmp_path, n_layers, seed)
    words = sentence(seed)
    expected = float64_layers(options, weights, words)
    clipped = np.mean(np.abs(expected[1:]) >= 0.5 - 1e-7)
    assert clipped > 0.1, f"only {clipped:.1%} of the LSTM outputs reach their clip"

    create_pipeline(load_allennlp(options, weights), lang="en").to_disk(tmp_path / "pipeline")
    nlp = spacy.load(tmp_path / "pipeline")
    doc = nlp(" ".join(words))
    assert len(doc) == MAX_WINDOW and tuple(doc._.elmo.segments) == ((0, MAX_WINDOW),)  # one window
    got = doc._.elmo.layers
    assert got.shape == expected.shape == (n_layers + 1, MAX_WINDOW, 24)
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    assert bilm.runner is not None and not bilm.runner.exact  # the optimized path, as shipped
    error = np.abs(got - expected).max()
    assert error < CONTRACT, f"default path ({'compiled' if compiled.compiled_step() else 'Python'} loop): {error:.2e}"


@pytest.mark.parametrize("n_layers,seed", [(3, 2), (4, 3)])
def test_every_inference_path_meets_the_contract_on_a_full_window(tmp_path, n_layers, seed):
    options, weights = published_model(tmp_path, n_layers, seed)
    words = sentence(seed)
    expected = float64_layers(options, weights, words)
    ids, lengths = batch_char_ids([words])
    ids, lengths = torch.from_numpy(ids), torch.from_numpy(lengths)

    def layers(bilm):
        with torch.no_grad():
            return bilm(ids, lengths).layers[:, 0, 1 : len(words) + 1].numpy()

    optimized = optimize_for_inference(load_allennlp(options, weights), char_cache_size=100)
    with python_step():
        python_loop = layers(optimized)
    paths = {
        "reference": layers(load_allennlp(options, weights)),
        "exact": layers(optimize_for_inference(load_allennlp(options, weights), exact=True)),
        "optimized": layers(optimized),
        "optimized, Python loop": python_loop,
    }
    errors = {name: float(np.abs(got - expected).max()) for name, got in paths.items()}
    assert max(errors.values()) < CONTRACT, errors
