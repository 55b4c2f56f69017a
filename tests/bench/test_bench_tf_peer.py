"""The TensorFlow peer benchmark's arithmetic: ratios taken round by round, the model's product mix.
(Running the peer needs TensorFlow's own environment: docs/speed.md.)"""
import pytest
import torch

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


def test_the_memory_roof_counts_every_weight_once_and_the_step_weights_at_each_further_timestep():
    from bench.bench_tf_peer import weight_bytes

    config = SHAPES["full"]
    step = 2 * config.n_layers * (4 * config.dim * config.projection_dim + config.projection_dim * config.dim)
    assert weight_bytes(config, 3, 4) - weight_bytes(config, 2, 4) == 4 * step
    assert round(4 * step / 1e6) == 168  # the published shape's 168 MB a timestep, as docs/speed.md says
    assert weight_bytes(config, 1, 2) * 2 == weight_bytes(config, 1, 4)  # bf16: half the bytes


def test_the_memory_roof_puts_each_round_against_the_read_rate_measured_after_it(monkeypatch):
    from bench import bench_tf_peer

    rates = iter([{"read": 10.0, "copy": 5.0}, {"read": 20.0, "copy": 10.0}, {"read": 10.0, "copy": 5.0}])  # GB/s
    asked = []

    def measure(kernel, elements, **options):
        asked.append((kernel, options["threads"], options["dtype"]))
        return {"kernel": kernel, "threads": options["threads"], "array_bytes": 4 * elements, "bytes_per_pass": 4 * elements,
                "gb_per_s_median": rounds[-1][kernel] - 1, "gb_per_s_best": rounds[-1][kernel], "check": True}

    monkeypatch.setattr(bench_tf_peer, "measure", measure)
    rounds, read_rounds = [], []
    for _ in range(3):
        rounds.append(next(rates))
        read_rounds.append(bench_tf_peer.read_rates(threads=2, quick=True))
    assert sorted(set(asked)) == [("copy", 2, "float32"), ("read", 2, "float32")]  # at the run's threads
    config = SHAPES["tiny"]
    singles = [["a", "b", "c"]]
    read = bench_tf_peer.weight_bytes(config, 5, 4)
    roof_at_10 = 3 / (read / 10e9)  # tokens/s the fp32 roof allows at 10 GB/s
    # fp32 runs at half the roof in each round (twice as fast in the round the machine read twice as fast)
    half = [3 / (roof_at_10 / 2), 3 / roof_at_10, 3 / (roof_at_10 / 2)]
    seconds = {"ours fp32": half, "ours bf16": half, TENSORFLOW: [3 / (roof_at_10 / 4)] * 3}
    roof = bench_tf_peer.memory_roof(config, singles, seconds, read_rounds)
    assert (roof["roof_kernel"], roof["read_gb_per_s"], roof["copy_gb_per_s"]) == ("read", 10.0, 5.0)
    assert (roof["read_gb_per_s_min"], roof["read_gb_per_s_max"]) == (10.0, 20.0)
    assert roof["roof_tokens_per_s_fp32"] == pytest.approx(roof_at_10)
    assert roof["copy_roof_tokens_per_s_fp32"] == pytest.approx(roof_at_10 / 2)
    fp32 = roof["modes"]["ours fp32"]
    assert (fp32["of_roof"], fp32["of_roof_min"], fp32["of_roof_max"]) == pytest.approx((0.5, 0.5, 0.5))
    assert fp32["of_copy_roof"] == pytest.approx(1.0)
    assert roof["modes"]["ours bf16"]["of_roof"] == pytest.approx(0.25)  # its roof is twice fp32's
    assert roof["three_times_tensorflow_of_fp32_roof"] == pytest.approx(0.75)


def test_the_batch_is_put_against_the_product_rates_of_its_own_round():
    from bench import bench_tf_peer

    config = SHAPES["tiny"]
    batch = (torch.zeros(1, 3, config.max_characters_per_token, dtype=torch.long), torch.tensor([3]))
    done = bench_tf_peer.work_done(config, [batch])["done_flops"]
    rate_rounds = [{"fp32_gflop_per_s": 1.0, "bf16_gflop_per_s": 2.0}, {"fp32_gflop_per_s": 2.0, "bf16_gflop_per_s": 4.0}]
    # fp32 at 80% of its rate in both rounds although the machine ran twice as fast in the second
    seconds = {"ours fp32": [done / 0.8e9, done / 1.6e9], "ours bf16": [done / 1.0e9, done / 1.0e9], TENSORFLOW: [1.0, 1.0]}
    roof = bench_tf_peer.roofline(config, [batch], seconds, rate_rounds)
    assert (roof["ours fp32"]["of_product_rate_min"], roof["ours fp32"]["of_product_rate_max"]) == pytest.approx((0.8, 0.8))
    assert roof["ours bf16"]["of_product_rate"] == pytest.approx((0.5 + 0.25) / 2)
    assert roof["ours fp32"]["product_rate"] == pytest.approx(1.5)
    assert TENSORFLOW not in roof and "ours int8" not in roof
    medians = bench_tf_peer.median_rates([{**r, "shapes": {"a": {"torch": i + 1.0}}} for i, r in enumerate(rate_rounds)])
    assert medians["fp32_gflop_per_s"] == 1.5 and medians["shapes"]["a"]["torch"] == 1.5
