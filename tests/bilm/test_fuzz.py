"""Property-based tests: any Unicode tokens, any lengths, any batch make-up."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..conftest import random_bilm

BILM = random_bilm(seed=7)
WIDTH = BILM.config.output_dim

# Every code point, lone surrogates included, plus hand-picked troublemakers.
tokens = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60),
    st.sampled_from(["", " ", "\n", "\x00", "\ud800", "e\u0301", "👩‍👩‍👧", "🇫🇷", "<S>", "</S>", "x" * 1000]),
)
sentences = st.lists(tokens, min_size=0, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(sentences, min_size=1, max_size=6), batch_size=st.integers(1, 8))
def test_any_batch_gives_finite_right_shaped_vectors_independent_of_batch_mates(batch, batch_size):
    together = BILM.embed(batch, batch_size=batch_size)
    assert len(together) == len(batch)
    for tokens_, layers in zip(batch, together):
        assert layers.shape == (3, len(tokens_), WIDTH) and layers.dtype == np.float32
        assert np.isfinite(layers).all()
    for tokens_, layers in zip(batch, together):
        [alone] = BILM.embed([tokens_])
        np.testing.assert_allclose(layers, alone, atol=1e-5)
