import datetime

from spacy_elmo.provenance import FLAGS_THAT_MATTER, command_line, provenance


def test_record_names_command_machine_and_date():
    record = provenance("python scripts/parity.py --output results/parity.json")
    assert record["command"] == "python scripts/parity.py --output results/parity.json"
    assert record["cpu"] and record["cpu_count"] >= 1 and record["torch_threads"] >= 1
    assert datetime.datetime.fromisoformat(record["date"]).tzinfo is not None
    assert record["commit"] is None or len(record["commit"]) == 40
    assert record["dirty"] in (None, True, False)
    assert set(record["cpu_flags"]) <= set(FLAGS_THAT_MATTER) and record["cpu_capability"]


def test_cpu_flags_read_from_cpuinfo(tmp_path, monkeypatch):
    import spacy_elmo.provenance as module

    fake = tmp_path / "cpuinfo"
    fake.write_text("model name\t: X\nflags\t\t: fpu avx2 fma avx512f amx_bf16 sse\n", encoding="utf-8")
    real_path = module.Path
    monkeypatch.setattr(module, "Path", lambda p: fake if p == "/proc/cpuinfo" else real_path(p))
    assert module.cpu_flags() == ["avx2", "fma", "avx512f", "amx_bf16"]


def test_a_package_main_reads_as_python_dash_m(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main = tmp_path / "spacy_elmo" / "__main__.py"
    argv = [str(main), "neighbors", "--output", str(tmp_path / "out" / "n.json"), "--query", "the river bank"]
    assert command_line(argv) == "python -m spacy_elmo neighbors --output out/n.json --query 'the river bank'"


def test_a_script_path_is_made_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert command_line([str(tmp_path / "scripts" / "soak.py"), "--docs", "5"]) == "python scripts/soak.py --docs 5"
