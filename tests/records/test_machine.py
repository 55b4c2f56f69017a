import spacy_elmo.records.machine as module


def test_cpu_flags_read_from_cpuinfo(tmp_path, monkeypatch):
    fake = tmp_path / "cpuinfo"
    fake.write_text("model name\t: X\nflags\t\t: fpu avx2 fma avx512f amx_bf16 sse\n", encoding="utf-8")
    real_path = module.Path
    monkeypatch.setattr(module, "Path", lambda p: fake if p == "/proc/cpuinfo" else real_path(p))
    assert module.cpu_flags() == ["avx2", "fma", "avx512f", "amx_bf16"]
