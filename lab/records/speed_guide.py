"""The tables of docs/speed.md, written from the benchmark records by ``python -m lab.records.numbers
--document docs/speed.md`` (blocks ``speed-choice``, ``speed-accuracy``, ``speed-one-thread``): each
precision's speed against fp32 by CPU and model size, at the median round, with what the run needed."""
import re
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from .reading import read_record
from .releases import PREVIOUS, PREVIOUS_RELEASE, RELEASE, SHIPPED

BENCH = "results/bench"
SHIPPED_RECORD = f"{RELEASE}/bilm-shipped.json"
PREVIOUS_RECORD = f"{PREVIOUS_RELEASE}/bilm-shipped.json"
# the CPUs the records ran on, by the folder of their records (spacy_elmo.records.machine.cpu_folder;
# docs/speed.md says how records written before provenance gave a family and model were assigned)
CPUS = {
    "amd-f25-m17": "AMD EPYC family 25 model 17 (Zen 4)",
    "amd-f25-model-unrecorded": "AMD EPYC family 25 without AVX-512 (model not recorded)",
    "intel-f6-model-unrecorded": "Intel Xeon family 6 with AMX (model not recorded)",
    "intel-f6-m207": "Intel Xeon family 6 model 207 (AVX512-BF16, no AMX shown; 260 MiB L3)",
    "cpu-unrecorded": "AVX2, no AVX-512 (CPU not recorded)",
}
# records outside a CPU's folder (a release's), by the folder of the CPU they ran on
RECORD_CPUS = {SHIPPED_RECORD: "amd-f25-m17", PREVIOUS_RECORD: "amd-f25-m17"}
VENDOR_NAMES = {"amd": "AMD", "intel": "Intel"}
# (model, record, shape): every model size on every CPU a bench_bilm record timed
CHOICES: Sequence[Tuple[str, str, str]] = (
    (f"en_small {SHIPPED}", SHIPPED_RECORD, "shipped"),
    (f"en_small {PREVIOUS}", PREVIOUS_RECORD, "shipped"),
    ("en_small 0.3.0", f"{BENCH}/intel-f6-model-unrecorded/bilm-shipped.json", "shipped"),
    ("en_small (release not recorded)", f"{BENCH}/cpu-unrecorded/bilm-shipped.json", "shipped"),
    ("`small` (random weights)", f"{BENCH}/amd-f25-m17/bilm.json", "small"),
    ("`small` (random weights)", f"{BENCH}/intel-f6-model-unrecorded/bilm.json", "small"),
    ("`small` (random weights)", f"{BENCH}/cpu-unrecorded/bilm.json", "small"),
    ("`original` (random weights)", f"{BENCH}/amd-f25-m17/bilm.json", "full"),
    ("`original` (random weights)", f"{BENCH}/intel-f6-model-unrecorded/bilm.json", "full"),
    ("`original` (random weights)", f"{BENCH}/cpu-unrecorded/bilm.json", "full"),
)


def cpu_label(path: str, data: Dict[str, Any]) -> str:
    """RETURNS (str): the CPU a record ran on: by the folder its provenance names (records written
    since it names one), else the folder it sits in (or ``RECORD_CPUS``' for a release's record), as
    ``CPUS`` describes it, else as the folder's name reads (``amd-f26-m2``: AMD family 26 model 2)."""
    folder = (data.get("provenance") or {}).get("cpu_folder") or RECORD_CPUS.get(path) or Path(path).parent.name
    if folder in CPUS:
        return CPUS[folder]
    named = re.fullmatch(r"([a-z0-9]+)-f(\d+)-m(\d+)", folder)
    if named is None:
        return folder
    vendor, family, model = named.groups()
    return f"{VENDOR_NAMES.get(vendor, vendor)} family {family} model {model}"
PRECISIONS = ("int8", "fp16", "bf16")


def _median_rate(timed: Dict[str, Any], mode: str) -> Optional[float]:
    seconds = timed["modes"].get(mode, {}).get("median_seconds")
    return timed["tokens"] / seconds if seconds else None


def repeats(data: Dict[str, Any]) -> int:
    """RETURNS (int): the rounds a bench_bilm run timed each mode (its ``--repeats``)."""
    return int(re.search(r"--repeats (\d+)", data["provenance"]["command"] or data["command"]).group(1))


def needs_label(data: Dict[str, Any], isa: Optional[str] = None) -> str:
    """RETURNS (str): what a speed record's run needed: the instructions, the compiled timestep loop,
    the char cache, the threads and the load beside it."""
    run = data["provenance"]
    compiled = (data.get("machine") or {}).get("compiled_step")
    loop = {True: "compiled loop (C++ compiler)", False: "Python loop"}.get(compiled, "loop not recorded")
    if "cache" in data:
        cache = f"char cache pre-filled with {data['cache']['vocab_tokens']:,} frequent words"
    elif "peer" in data:
        cache = "no char cache (every call encodes its tokens, as the peer does)"
    elif "softmax_samples" in data:  # a training step: no cache, every token encoded with its gradient
        cache, loop = "no char cache (training encodes every token)", "the one-node training loop"
        if compiled and any("x_torch_cells_median" in row for row in data.get("rows", ())):
            loop += ", its cells compiled (C++ compiler)"  # the benchmark knows the cells' kernels from then on
    else:
        cache = f"char cache warm ({data['sentences']['count']} sentences, each round again)"
    load = ((data.get("load_average") or {}).get("before") or (data.get("memory") or {}).get("before", {}).get("load_average")
            or (data.get("machine") or {}).get("load_average_before"))
    threads = run["torch_threads"]
    busy = f"load {load[0]:.1f} on {run['cpu_count']} cores at the start" if load else "load not recorded"
    return "; ".join(x for x in (isa, loop, cache, f"{threads} thread{'s' * (threads != 1)}", busy) if x)


def choice_table(root: Path) -> str:
    """RETURNS (str): fp32's median rate and each precision's median rate against it, batch and one
    sentence at a time, for every model size on every CPU."""
    head = ("| model | CPU | batch: fp32 tokens/s | int8 | fp16 | bf16 | one sentence: fp32 tokens/s | int8 | fp16 | bf16 "
            "| rounds; needed | record |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for model, path, shape in CHOICES:
        data = read_record(root, path)
        cpu = cpu_label(path, data)
        cells = []
        for part in ("batch", "single"):
            timed = data["shapes"][shape][part]
            fp32 = _median_rate(timed, "ours_opt")
            cells.append(f"{fp32:,.1f}")
            for mode in PRECISIONS:
                rate = _median_rate(timed, mode)
                cells.append(f"{rate / fp32:.2f}x" if rate else "–")
        link = f"[{Path(path).parent.name}/{Path(path).name}](../{path})"
        lines.append(f"| {model} | {cpu} | " + " | ".join(cells) + f" | {repeats(data)}; {needs_label(data)} | {link} |")
    return "\n".join(lines) + "\n"


def accuracy_table(root: Path) -> str:
    """RETURNS (str): how close each precision's outputs are to fp32 on the shipped model."""
    modes = read_record(root, SHIPPED_RECORD)["shapes"]["shipped"]["batch"]["modes"]
    lines = ["| precision | cosine to fp32: mean | lowest | largest difference from the plain model |", "|---|---:|---:|---:|"]
    for mode, label in (("ours_opt", "fp32 (optimized)"), *((m, m) for m in PRECISIONS)):
        row = modes[mode]
        lines.append(f"| {label} | {row['cosine_mean']:.6f} | {row['cosine_min']:.6f} | {row['max_abs_diff_vs_baseline']:.1e} |")
    return "\n".join(lines) + "\n"


def one_thread_table(root: Path) -> str:
    """RETURNS (str): ``original``'s shape one sentence at a time on one thread, each precision at its
    median round with the range over the rounds."""
    path = f"{BENCH}/amd-f25-m17/one-sentence-one-thread.json"
    data = read_record(root, path)
    lines = ["| precision | tokens/s: median (range) | x fp32: median (range) |", "|---|---:|---:|"]
    for mode in ("fp32", "bf16", "int8"):
        timed = data["modes"][mode]
        rates = sorted(data["tokens"] / s for s in timed["round_seconds"])
        times = timed["x_fp32_per_round"]
        lines.append(f"| {mode} | {data['tokens'] / timed['median_seconds']:,.1f} ({rates[0]:,.1f}-{rates[-1]:,.1f}) | "
                     f"{timed['x_fp32_median']:.2f} ({min(times):.2f}-{max(times):.2f}) |")
    needed = needs_label(data, f"{cpu_label(path, data)}; AVX512-VNNI, AVX512-BF16")
    return "\n".join(lines) + f"\n\n{len(data['modes']['fp32']['round_seconds'])} rounds; {needed} ([{Path(path).name}](../{path})).\n"


TABLES = {"speed-choice": choice_table, "speed-accuracy": accuracy_table, "speed-one-thread": one_thread_table}
