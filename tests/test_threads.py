import pytest
import torch
from spacy.language import Language
from spacy.util import registry


def test_set_torch_threads_resolves_from_config_and_sets_threads():
    before = torch.get_num_threads()
    try:
        callback = registry.callbacks.get("spacy-elmo.set_torch_threads.v1")(threads=2)
        assert callback(Language) is Language
        assert torch.get_num_threads() == 2
        registry.callbacks.get("spacy-elmo.set_torch_threads.v1")(threads=0)(Language)
        assert torch.get_num_threads() == 2  # 0 leaves the setting alone
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError):
        registry.callbacks.get("spacy-elmo.set_torch_threads.v1")(threads=-1)
