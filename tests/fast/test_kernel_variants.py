"""Every kernel variant this CPU can run is built for its instruction set and gives the reference's
results; the dispatcher takes the best the CPU runs, a forced one where asked, and refuses one the
CPU cannot run."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from spacy_elmo.fast import bf16_rows, compiled, int8_rows, kernel_library, kernel_variants, optimize_for_inference
from spacy_elmo.fast.in_place import run_in_place

from ..conftest import load_tiny_bilm
from .test_compiled import pair_inputs

X86_V3 = kernel_variants.by_name("avx2", "x86_64").needs
# the instruction sets each variant's arithmetic is compiled with, and those it must not use
COMPILED_FOR = {
    "portable": (set(), {"avx", "avx2", "fma", "avx512f"}),
    "avx2": ({"avx", "avx2", "fma"}, {"avx512f", "avx512_bf16", "avx512_vnni"}),
    "avx512": ({"avx2", "fma", "avx512f", "avx512bw"}, {"avx512_bf16", "avx512_vnni"}),
    "avx512_vnni": ({"avx512f", "avx512_vnni"}, {"avx512_bf16"}),
    "avx512_bf16": ({"avx512f", "avx512_bf16", "avx512_vnni"}, set()),
    "native": (set(), set()),
}
NATIVE_BF16, NATIVE_INT8 = {"avx512_bf16"}, {"avx512_vnni", "avx512_bf16"}  # vdpbf16ps and vpdpbusd loops


def test_the_best_variant_the_cpu_runs_is_chosen():
    x86 = kernel_variants.variants("x86_64")
    assert [v.name for v in x86] == ["portable", "avx2", "avx512", "avx512_vnni", "avx512_bf16"]
    chosen = {name: kernel_variants.chosen(flags, environ={}).name for name, flags in
              [("sse2", frozenset({"sse2"})), ("avx2 laptop", X86_V3),
               ("avx-512", kernel_variants.by_name("avx512", "x86_64").needs),
               ("ice lake", kernel_variants.by_name("avx512", "x86_64").needs | {"avx512_vnni"}),
               ("sapphire rapids", kernel_variants.by_name("avx512_bf16", "x86_64").needs | {"amx_bf16"})]}
    if kernel_variants.variants() == x86:
        assert chosen == {"sse2": "portable", "avx2 laptop": "avx2", "avx-512": "avx512", "ice lake": "avx512_vnni",
                          "sapphire rapids": "avx512_bf16"}
    # AVX2 without FMA (or BMI2) is not x86-64-v3: the compiler may emit those, so portable it is
    assert kernel_variants.missing(x86[1], X86_V3 - {"fma"}) == ["fma"]
    assert [v.name for v in kernel_variants.variants("aarch64")] == ["portable", "native"]


def test_the_environment_forces_a_variant_and_one_the_cpu_cannot_run_is_refused_with_the_reason():
    if kernel_variants.variants() != kernel_variants.variants("x86_64"):
        pytest.skip("the x86-64 variants are chosen on an x86-64 machine")
    env = kernel_variants.ENV
    assert kernel_variants.chosen(X86_V3, environ={env: "portable"}).name == "portable"
    with pytest.raises(kernel_variants.VariantError) as refused:
        kernel_variants.chosen(X86_V3, environ={env: "avx512"})
    assert str(refused.value) == (f"${env}=avx512: this CPU cannot run the avx512 kernels (it lacks avx512bw, "
                                  "avx512cd, avx512dq, avx512f, avx512vl); it runs: portable, avx2")
    with pytest.raises(kernel_variants.VariantError, match=r"'avx9' is not a kernel variant here; the variants are: portable, avx2"):
        kernel_variants.chosen(X86_V3, environ={env: "avx9"})


def test_a_variant_the_cpu_cannot_run_is_never_loaded(monkeypatch):
    lacking = [v for v in kernel_variants.variants() if kernel_variants.missing(v)]
    if not lacking:
        pytest.skip("this CPU runs every variant")
    with pytest.raises(kernel_variants.VariantError, match=f"cannot run the {lacking[0].name} kernels"):
        with kernel_library.using(lacking[0].name):
            pass  # pragma: no cover
    monkeypatch.setattr(kernel_library, "_STATE", {"ops": {}, "errors": {}})
    monkeypatch.setenv(kernel_variants.ENV, lacking[0].name)
    with pytest.warns(RuntimeWarning, match=f"cannot run the {lacking[0].name} kernels .*running the Python step"):
        assert kernel_library.library(build=False) is None
    assert kernel_library.status()["variant"] is None and "it lacks" in kernel_library.status()["refused"]


@pytest.fixture(scope="session")
def built_variants():
    """Every variant of this machine, built once (one build: the torch glue compiled once for all) in
    the tests' shared kernel folder; those this CPU cannot run are compiled, never loaded."""
    if kernel_library.compiler() is None:
        pytest.skip("no C++ compiler here")
    return kernel_library.build_variants(kernel_variants.variants())


def test_every_variant_compiles_here_even_those_this_cpu_cannot_run(built_variants):
    """Compiler errors in the AVX-512 code show on an AVX2 machine too (its results only where it runs)."""
    for variant in kernel_variants.variants():
        assert built_variants[variant.name] is None, built_variants[variant.name]
        record = json.loads(kernel_library.record_path(kernel_library.library_path(variant)).read_text(encoding="utf-8"))
        assert record["variant"] == variant.name and record["flags"] == list(variant.flags)


@pytest.fixture(params=[v.name for v in kernel_variants.variants()])
def variant(request, built_variants):
    """Each variant of this machine, as the name ``kernel_library.using`` takes: skipped, with the
    reason, where this CPU cannot run it."""
    lacking = kernel_variants.missing(kernel_variants.by_name(request.param))
    if lacking:
        pytest.skip(f"this CPU cannot run the {request.param} kernels (it lacks {', '.join(lacking)})")
    assert built_variants[request.param] is None, built_variants[request.param]
    with kernel_library.using(request.param):
        yield request.param


def test_each_variant_is_compiled_for_its_instruction_set(variant):
    ops = kernel_library.library()
    assert ops is not None and ops.variant() == variant
    compiled_for = set(ops.instruction_sets().split())
    needed, forbidden = COMPILED_FOR[variant]
    assert needed <= compiled_for and not forbidden & compiled_for, compiled_for
    assert bf16_rows.native() == (variant in NATIVE_BF16) and int8_rows.native() == (variant in NATIVE_INT8)


def test_each_variants_loop_gives_the_python_loops_results(variant):
    for batch_sizes, clip, scale in [([3, 3, 2, 1], 3.0, 1.0), ([4, 4, 4], 0.5, 30.0), ([5, 2, 0, 0], None, 30.0)]:
        pair, projected, states, weights = pair_inputs(batch_sizes, clip=clip, scale=scale)
        expected, expected_finals = run_in_place(pair, projected, batch_sizes, states, weights, packed=True, fused=True)
        got, finals = compiled.run_pair_compiled(pair, projected, batch_sizes, states, weights)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
        for (h1, c1), (h2, c2) in zip(expected_finals, finals):
            torch.testing.assert_close(h2, h1, atol=1e-5, rtol=0)
            torch.testing.assert_close(c2, c1, atol=1e-5, rtol=0)


def test_each_variants_bf16_products_are_torchs(variant):
    torch.manual_seed(0)
    for n_dir, rows, width, out_features in [(2, 1, 130, 70), (1, 3, 7, 129)]:
        weights = torch.randn(n_dir, width, out_features) * 0.035
        x, add = torch.randn(n_dir, rows, width), torch.randn(n_dir, rows, out_features)
        got = bf16_rows.product(x, bf16_rows.pack(weights), torch.empty(n_dir, rows, out_features), add=add)
        # the same bf16 contract; the sums' order differs, so a rounded product may land one bf16 step away
        torch.testing.assert_close(got - add, torch.bmm(x.bfloat16(), weights.bfloat16()).float(), rtol=2**-7, atol=1e-6)


def test_each_variants_int8_products_are_the_definition_bit_for_bit(variant):
    torch.manual_seed(0)
    for n_dir, rows, width, out_features in [(2, 1, 130, 70), (2, 9, 33, 129)]:
        packed = int8_rows.pack(torch.randn(n_dir, out_features, width) * 0.035)
        x, bias = torch.randn(n_dir, rows, width), torch.randn(n_dir, out_features)
        got = int8_rows.product(x, packed, torch.empty(n_dir, rows, out_features), bias=bias)
        assert torch.equal(got, int8_rows.reference(x, packed, bias=bias))


def test_each_variant_runs_the_tiny_model_to_the_reference(variant, tiny_sentences, tiny_expected):
    got = optimize_for_inference(load_tiny_bilm()).embed(tiny_sentences, batch_size=len(tiny_sentences))
    for i, layers_i in enumerate(got):
        np.testing.assert_allclose(layers_i, tiny_expected[f"layers_{i}"], atol=1e-5, err_msg=f"sentence {i}")


def test_a_forced_variant_runs_in_a_fresh_process_and_its_run_record_names_it(built_variants):
    code = ("import json, warnings; warnings.simplefilter('error')\n"
            "from spacy_elmo.fast import kernel_library as k\n"
            "from spacy_elmo.records.provenance import provenance\n"
            "ops = k.library(build=False)\n"
            "print(json.dumps([ops.variant(), provenance(model=None, data={})['kernel_variant'], k.status()['chosen_by']]))\n")
    env = dict(os.environ, **{kernel_variants.ENV: "portable"})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["portable", "portable", f"${kernel_variants.ENV}"]
