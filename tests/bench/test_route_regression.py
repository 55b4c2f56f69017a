"""bench/route_regression.py: the fp32 routes as chosen against torch's alone, per instruction-set setting."""
import json

import pytest

from bench import route_regression
from spacy_elmo.fast import prepacked


@pytest.mark.skipif(not prepacked.available(), reason="this torch has no oneDNN linear ops")
def test_each_setting_chooses_afresh_in_its_own_process_and_the_libraries_say_what_they_ran(tmp_path):
    out = tmp_path / "route-regression.json"
    route_regression.main(["--quick", "--isa", "native,avx2", "--rounds", "1", "--json", str(out)])
    record = json.loads(out.read_text())
    assert set(record["settings"]) == {"native", "avx2"}
    for name, setting in record["settings"].items():
        # chosen in the child, measured there (no kept choice read), routes of ours
        (measured,) = setting["route_measurements"]
        assert measured["source"] == "measured in this process", name
        assert set(setting["routes_chosen"].values()) <= set(prepacked.ROUTES)
        for workload in ("batch", "one sentence"):
            rows = setting["workloads"][workload]
            assert all(rows[route]["tokens_per_s"] > 0 for route in ("as chosen", "torch", "onednn"))
            assert rows["as_chosen_vs_torch"]["min"] <= rows["as_chosen_vs_torch"]["median"] <= rows["as_chosen_vs_torch"]["max"]
    # the switches reached the libraries: oneDNN reports AVX2 under them, and torch's kernels too
    avx2 = record["settings"]["avx2"]
    assert any("AVX2" in line for line in avx2["libraries_report"]["onednn"])
    assert avx2["cpu_capability"] == "AVX2" and avx2["kernel_variant"] in ("avx2", "portable")
