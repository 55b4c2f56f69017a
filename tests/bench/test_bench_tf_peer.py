"""The TensorFlow peer benchmark's arithmetic: ratios taken round by round, the model's product mix.
(Running the peer needs TensorFlow's own environment: docs/speed.md.)"""
import pytest

from bench.bench_tf_peer import TENSORFLOW, model_products, summarize
from bench.workloads import SHAPES, flops_per_position


def test_ratios_against_tensorflow_are_taken_round_by_round_with_their_range():
    seconds = {"batch": {"ours fp32": [1.0, 2.0, 1.0], TENSORFLOW: [2.0, 2.0, 3.0]}}
    entry = summarize(seconds, {"batch": 100})["batch"]
    assert entry["ours fp32"]["tokens_per_s"] == 100.0 and entry["ours fp32"]["tokens_per_s_min"] == 50.0
    assert (entry["ours fp32"]["vs_tensorflow"], entry["ours fp32"]["vs_tensorflow_min"],
            entry["ours fp32"]["vs_tensorflow_max"]) == (2.0, 1.0, 3.0)
    assert "vs_tensorflow" not in entry[TENSORFLOW]


def test_the_product_mix_is_the_lstms_and_the_token_encoders_products_at_the_workloads_rows():
    config = SHAPES["full"]
    products = model_products(config, positions=100, distinct=100, rows=100)
    flops = sum(2.0 * rows * width * out * count for rows, width, out, count in products)
    # every position through every product: the model's count without the convolutions
    per_position = flops_per_position(config)
    convolutions = sum(2 * (config.max_characters_per_token - w + 1) * w * config.char_embedding_dim * n for w, n in config.filters)
    assert flops == pytest.approx(100 * (per_position["total"] - convolutions))
