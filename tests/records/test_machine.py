import spacy_elmo.records.machine as module
from spacy_elmo.fast import kernel_library, kernel_variants


import pytest

ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "stepping\t: 1\nflags\t\t: fpu avx2 fma avx512f avx512_bf16 avx512_vnni\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n")


def fake_cpuinfo(monkeypatch, tmp_path, text):
    fake = tmp_path / "cpuinfo"
    fake.write_text(text, encoding="utf-8")
    real_path = module.Path
    monkeypatch.setattr(module, "Path", lambda p: fake if p == "/proc/cpuinfo" else real_path(p))


def test_cpu_flags_read_from_cpuinfo(tmp_path, monkeypatch):
    fake_cpuinfo(monkeypatch, tmp_path, "model name\t: X\nflags\t\t: fpu avx2 fma avx512f amx_bf16 sse\n")
    assert module.cpu_flags() == ["avx2", "fma", "avx512f", "amx_bf16"]


def test_a_cpu_is_identified_by_vendor_family_and_model_not_its_instruction_sets(tmp_path, monkeypatch):
    fake_cpuinfo(monkeypatch, tmp_path, ZEN4)
    assert module.cpu_identity() == {"vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1}
    assert (module.cpu_model(), module.cpu_folder()) == ("AMD EPYC", "amd-f25-m17")
    # a Zen 5 reports the same instruction sets, and gets a folder of its own
    fake_cpuinfo(monkeypatch, tmp_path, ZEN4.replace("cpu family\t: 25", "cpu family\t: 26", 1))
    assert module.cpu_flags() == ["avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"]
    assert module.cpu_folder() == "amd-f26-m17"


@pytest.mark.parametrize("identity,folder", [
    ({"vendor": "GenuineIntel", "family": 6, "model": 143, "stepping": 8}, "intel-f6-m143"),
    ({"vendor": "Some Vendor, Inc.", "family": 7, "model": 1}, "somevendorinc-f7-m1"),
    ({"implementer": "0x41", "part": "0xd0c"}, "arm-0x41-0xd0c"),
])
def test_the_folder_of_a_cpu_names_what_cpuinfo_identifies(identity, folder):
    assert module.cpu_folder(identity) == folder


def test_a_cpu_without_an_identity_gets_an_unidentified_folder(tmp_path, monkeypatch):
    fake_cpuinfo(monkeypatch, tmp_path, "processor\t: 0\nFeatures\t: fp asimd\n")
    assert module.cpu_identity() == {}
    assert module.cpu_folder().endswith("-unidentified")


def test_a_record_path_names_this_cpus_folder_in_place_of_cpu(tmp_path, monkeypatch):
    fake_cpuinfo(monkeypatch, tmp_path, ZEN4)
    assert module.record_path("results/bench/CPU/tf-peer.json") == "results/bench/amd-f25-m17/tf-peer.json"
    assert module.record_path("results/bench/xcpu/CPUs.json") == "results/bench/xcpu/CPUs.json"


def test_the_kernel_variant_is_named_or_why_none_runs(monkeypatch):
    monkeypatch.delenv(kernel_variants.ENV, raising=False)
    assert module.kernel_variant() == kernel_variants.chosen().name
    monkeypatch.setenv(kernel_variants.ENV, "avx9")
    assert module.kernel_variant().startswith(f"refused: ${kernel_variants.ENV}=avx9: 'avx9' is not a kernel variant")
    monkeypatch.setenv(kernel_library.ENV, "0")
    assert module.kernel_variant() == f"off ({kernel_library.ENV}=0)"
