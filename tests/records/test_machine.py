import spacy_elmo.records.machine as module
from spacy_elmo.fast import kernel_library, kernel_variants


def test_cpu_flags_read_from_cpuinfo(tmp_path, monkeypatch):
    fake = tmp_path / "cpuinfo"
    fake.write_text("model name\t: X\nflags\t\t: fpu avx2 fma avx512f amx_bf16 sse\n", encoding="utf-8")
    real_path = module.Path
    monkeypatch.setattr(module, "Path", lambda p: fake if p == "/proc/cpuinfo" else real_path(p))
    assert module.cpu_flags() == ["avx2", "fma", "avx512f", "amx_bf16"]


def test_the_kernel_variant_is_named_or_why_none_runs(monkeypatch):
    monkeypatch.delenv(kernel_variants.ENV, raising=False)
    assert module.kernel_variant() == kernel_variants.chosen().name
    monkeypatch.setenv(kernel_variants.ENV, "avx9")
    assert module.kernel_variant().startswith(f"refused: ${kernel_variants.ENV}=avx9: 'avx9' is not a kernel variant")
    monkeypatch.setenv(kernel_library.ENV, "0")
    assert module.kernel_variant() == f"off ({kernel_library.ENV}=0)"
