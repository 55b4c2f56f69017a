"""Smoke test of the timestep profile on a tiny model: products, elementwise ops and overhead counted per timestep."""
import json

from bench import profile_step
from lab.records.check import check_record


def test_shares_cover_the_profiled_time_and_are_written(tmp_path):
    out, md = tmp_path / "profile.json", tmp_path / "profile.md"
    report = profile_step.main(["--quick", "--json", str(out), "--markdown", str(md)])
    tiny = report["shapes"]["tiny"]
    assert set(tiny["share"]) == {"products", "elementwise", "other ops", "Python and dispatch"}
    python = report["python_step"]["tiny"] if tiny["loop"] == "compiled" else tiny
    # every timestep runs the recurrent and the output product, and the cell's elementwise ops
    assert python["ops_per_timestep"]["products"] >= 2 and python["ops_per_timestep"]["elementwise"] >= 5
    if tiny["loop"] == "compiled":  # the same products, and one call for the whole loop of a layer pair
        assert tiny["ops_per_timestep"]["products"] >= 2
        assert tiny["ops_per_timestep"]["elementwise"] < python["ops_per_timestep"]["elementwise"] / 2
        assert "tiny (2x32_16), Python loop" in md.read_text()
    assert tiny["share"]["products"] > 0 and tiny["share"]["elementwise"] > 0
    assert 0 <= tiny["share"]["Python and dispatch"] < 1
    # timesteps: (tokens + <S> + </S>) per sentence, times the layers
    assert tiny["timesteps"] == (tiny["tokens"] + 2 * report["sentences"]["count"]) * tiny["config"]["n_layers"]
    assert json.loads(out.read_text())["shapes"]["tiny"]["timesteps"] == tiny["timesteps"]
    assert "Python and dispatch" in md.read_text() and report["provenance"]["cpu_flags"] is not None
    assert check_record(report) == [] and list(report["provenance"]["data"]) == ["sample/ewt/test.conllu"]
