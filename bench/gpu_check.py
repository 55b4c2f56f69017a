"""One prepared check of spacy-elmo on a CUDA GPU: parity with the CPU, inference speed by precision,
pretraining steps, and a ``spacy train --gpu-id 0`` run, written to one JSON record.

Here, on a machine that reaches PyPI, once: spaCy's stack for the GPU machine's Python (3.12 by
default), unpacked, stripped of tests, other languages' data and debug symbols, in one archive
(17 MB; the GPU machine has torch, numpy, h5py and safetensors but neither spaCy nor thinc, and no
network):

    python -m bench.gpu_check bundle --output .whl/gpusite.tar.xz

Then, just before sending the tree (a copy without ``.git``), the commit it is and every tracked
file's blob id, from which the record's provenance checks the copy (``records.provenance``):

    python -m bench.gpu_check manifest --output .whl/tree-manifest.txt

On the GPU machine, from the repository's root (about 3 minutes on one H200):

    mkdir -p /tmp/site && tar -xJf .whl/gpusite.tar.xz -C /tmp/site
    SPACY_ELMO_TREE_MANIFEST=.whl/tree-manifest.txt PYTHONPATH=/tmp/site:$PWD \\
        python3 -m bench.gpu_check run --output results/gpu/GPU/gpu-check.json

Each part runs on its own, so one that fails is recorded with its error and the others still run;
the record is rewritten after each part, so a run cut short keeps what it finished.

- ``parity``: the GPU's float32 (TF32 off) against the CPU's plain float32 computation, on the full
  published shape (2x4096_512_2048cnn_2xhighway, random weights), the shipped en_small and the tiny
  AllenNLP fixture (also against AllenNLP's own outputs), batched (64 sentences) and one sentence at
  a time; both the default path (``load_bilm(..., device="cuda")``: ``optimize_for_inference``) and
  the plain one.
- ``inference``: tokens/s on the full shape, a batch of 64 and one sentence at a time, in fp32,
  TF32, bf16 (``precision="bf16"``) and fp16 (float16 autocast), each with its peak GPU memory and
  its largest difference from fp32; the same batches on this machine's CPU cores for scale.
- ``pretraining``: tokens/s of the training step (``spacy_elmo.training.loop.train_step``: sampled
  softmax, backward, Adam) on en_small's shape and on the full shape, autocast off (TF32 off and
  on), bf16, and fp16 with its gradient scaler, with peak memory.
- ``spacy``: ``python -m spacy train configs/tagger-elmo.cfg --gpu-id 0`` on the bundled EWT sample
  with the shipped biLM for 200 steps, then ``spacy.load`` under ``spacy.require_gpu`` and a
  prediction: where its arrays live, and the tagger's accuracy.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.fast import optimize_for_inference
from spacy_elmo.io import load_allennlp
from spacy_elmo.io.loading import DEFAULT_CHAR_CACHE_SIZE, resolve_bilm
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance, write_tree_manifest

from .workloads import SHAPES, conllu_sentences

REPO = Path(__file__).resolve().parent.parent
EWT = REPO / "sample" / "ewt"
TINY = REPO / "tests" / "data" / "allennlp" / "tiny"
PARITY_TOLERANCE = 1e-4
BUNDLE_PYTHON = "3.12"
# spaCy's stack for the GPU machine, each with what it needs there beyond torch, numpy and the
# machine's own packages (typer, tqdm, requests, jinja2, packaging, setuptools are in its image)
BUNDLE_PACKAGES = (
    "spacy>=3.7,<3.9", "thinc>=8.2,<8.4", "srsly", "cymem", "preshed", "murmurhash", "blis", "wasabi", "catalogue",
    "confection", "weasel", "spacy-legacy", "spacy-loggers", "langcodes", "language-data", "marisa-trie",
    "cloudpathlib", "smart-open", "pydantic", "pydantic-core", "annotated-types", "typing-inspection",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.command == "bundle":
        return bundle(args.output, python=args.python)
    if args.command == "manifest":
        args.output.parent.mkdir(parents=True, exist_ok=True)
        return {"commit": write_tree_manifest(args.output)}
    return run_check(args)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pack = commands.add_parser("bundle", help="spaCy's stack for the GPU machine, in one archive")
    pack.add_argument("--output", type=Path, required=True, help="the archive to write (.tar.xz)")
    pack.add_argument("--python", default=BUNDLE_PYTHON, help="the GPU machine's Python version")
    manifest = commands.add_parser("manifest", help="the commit and tracked files of the tree about to be sent")
    manifest.add_argument("--output", type=Path, required=True)
    check = commands.add_parser("run", help="the check itself, on the GPU machine")
    check.add_argument("--output", type=Path, required=True, help="the JSON record to write")
    check.add_argument("--device", default="cuda", help="the device checked (cpu: a dry run of the script)")
    check.add_argument("--parts", default="parity,inference,pretraining,lm,spacy", help="comma-separated parts")
    check.add_argument("--rounds", type=int, default=5, help="timed rounds per setting (after one warm-up)")
    check.add_argument("--spacy-steps", type=int, default=200)
    check.add_argument("--quick", action="store_true", help="the tiny shape everywhere (a dry run on CPU)")
    return parser.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# the bundle


def bundle(output: Path, *, python: str) -> Dict:
    """Download spaCy's stack as wheels for ``python`` on x86-64 Linux, unpack them into one folder
    (a wheel unpacked is an installed package), drop what a training run never reads, and write the
    folder as a .tar.xz. RETURNS (dict): what went in."""
    with tempfile.TemporaryDirectory() as tmp:
        wheels, site = Path(tmp) / "wheels", Path(tmp) / "site"
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--python-version", python, "--implementation", "cp", "-d", str(wheels)]
        for name in PLATFORMS:
            command += ["--platform", name]
        subprocess.run([*command, *BUNDLE_PACKAGES], check=True)
        import zipfile

        names = sorted(p.name for p in wheels.glob("*.whl"))
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        _trim(site)
        _entry_points(site)
        output.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-cJf", str(output.resolve()), "-C", str(site), "."], check=True)
    summary = {"archive": str(output), "bytes": output.stat().st_size, "wheels": names, "python": python}
    print(json.dumps(summary, indent=1))
    return summary


def _trim(site: Path) -> None:
    """What a training run never reads: the packages' tests, Cython sources, and the shared
    libraries' symbol tables. (spaCy's languages stay: its registry imports every one.)"""
    import shutil

    for tests in ("spacy/tests", "thinc/tests", "blis/tests", "srsly/tests"):
        shutil.rmtree(site / tests, ignore_errors=True)
    for pattern in ("*.pyx", "*.pxd", "*.cpp", "*.c"):
        for path in site.rglob(pattern):
            path.unlink()
    libraries = [str(p) for p in site.rglob("*.so")]
    if libraries:
        subprocess.run(["strip", "--strip-unneeded", *libraries], check=True)


def _entry_points(site: Path) -> None:
    """spacy-elmo's entry points (setup.cfg), so that spaCy finds the ``elmo`` factory and the
    architectures from a checkout on ``PYTHONPATH`` without installing it."""
    import configparser

    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    from spacy_elmo import __version__

    info = site / f"spacy_elmo-{__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: spacy-elmo\nVersion: {__version__}\n", encoding="utf-8")
    lines = []
    for group, body in setup["options.entry_points"].items():
        lines += [f"[{group}]", *(line.strip() for line in body.strip().splitlines()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# the check


def run_check(args: argparse.Namespace) -> Dict:
    device = torch.device(args.device)
    command = "python -m bench.gpu_check " + " ".join(_argv(args))
    mark_start(command)
    record: Dict[str, Any] = {
        "command": command, "machine": machine(device), "parity_tolerance": PARITY_TOLERANCE, "parts": {},
    }
    train, test = conllu_sentences(EWT / "train.conllu"), conllu_sentences(EWT / "test.conllu")
    parts: Dict[str, Callable[[], Dict]] = {
        "parity": lambda: parity(device, test, quick=args.quick),
        "inference": lambda: inference(device, train, rounds=args.rounds, quick=args.quick),
        "pretraining": lambda: pretraining(device, train, quick=args.quick),
        "lm": lambda: language_model(device, test),
        "spacy": lambda: spacy_run(device, steps=args.spacy_steps),
    }
    started = time.perf_counter()
    for name in args.parts.split(","):
        log(f"{name}: starting at {time.perf_counter() - started:.0f} s")
        start = time.perf_counter()
        try:
            result = parts[name]()
            result["status"] = "finished"
        except Exception as error:  # one part's failure is a result too: record it and go on
            result = {"status": "failed", "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()[-4000:]}
            log(result["traceback"])
        result["seconds"] = round(time.perf_counter() - start, 1)
        record["parts"][name] = result
        record["seconds"] = round(time.perf_counter() - started, 1)
        write(record, args.output)
        log(f"{name}: {result['status']} in {result['seconds']} s")
    record["all_finished"] = all(p["status"] == "finished" for p in record["parts"].values())
    write(record, args.output)
    return record


def _argv(args: argparse.Namespace) -> List[str]:
    words = ["run", "--output", str(args.output), "--device", args.device, "--parts", args.parts,
             "--rounds", str(args.rounds), "--spacy-steps", str(args.spacy_steps)]
    return words + (["--quick"] if args.quick else [])


def write(record: Dict, path: Path) -> None:
    record["provenance"] = provenance(
        model=[model_record()], data=data_record([EWT / "train.conllu", EWT / "test.conllu", TINY]),
        model_note="the shipped en_small (parity, lm, spacy, and the pretraining shape); the other models are "
        "the tiny AllenNLP fixture and random weights (torch seed 0) of the full published shape",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def log(message: str) -> None:
    print(f"[gpu-check] {message}", file=sys.stderr, flush=True)


def machine(device: torch.device) -> Dict:
    info: Dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
        "cpu": _cpu_model(), "cpu_threads": torch.get_num_threads(), "device": str(device),
    }
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        info.update({
            "gpu": properties.name, "gpu_memory_gib": round(properties.total_memory / 2**30, 1),
            "capability": f"{properties.major}.{properties.minor}", "multiprocessors": properties.multi_processor_count,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "driver": _driver(),
        })
    for name in ("spacy", "thinc", "cupy"):
        try:
            info[name] = __import__(name).__version__
        except Exception as error:
            info[name] = f"not importable: {type(error).__name__}: {error}"
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver() -> Optional[str]:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return done.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """float32 products in TF32 (tensor cores) or in full float32, whatever torch's default."""
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: torch.device) -> Optional[float]:
    return round(torch.cuda.max_memory_allocated(device) / 2**20, 1) if device.type == "cuda" else None


def random_bilm(config: BiLMConfig, seed: int = 0) -> BiLM:
    """A biLM of ``config``'s shape with random weights (torch seed ``seed``), plain, in eval mode."""
    torch.manual_seed(seed)
    return BiLM(config).eval()


def on_device(bilm: BiLM, device: torch.device, *, optimize: bool, precision: str = "fp32") -> BiLM:
    """A copy of ``bilm`` on ``device``: the default path (as ``load_bilm(..., device=)`` gives it) or
    the plain one."""
    copy = BiLM(bilm.config)
    copy.load_state_dict(bilm.state_dict())
    copy.eval().to(device)
    if optimize:
        optimize_for_inference(copy, precision=precision, char_cache_size=DEFAULT_CHAR_CACHE_SIZE)
    return copy


def largest_difference(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) if x.size else 0.0 for x, y in zip(a, b))


# ---- parity


def parity(device: torch.device, test: List[List[str]], *, quick: bool) -> Dict:
    batch = [s for s in test if 5 <= len(s) <= 40][:64]
    alone = batch[:8]
    models: Dict[str, BiLM] = {"tiny_allennlp": load_allennlp(TINY / "options.json", TINY / "weights.hdf5")}
    if not quick:
        models["en_small"] = resolve_bilm()
        models["full_random"] = random_bilm(SHAPES["full"])
    results: Dict[str, Any] = {}
    with tf32(False):
        for name, cpu in models.items():
            cpu.eval()
            reference_batch = cpu.embed(batch, batch_size=64)
            reference_alone = [cpu.embed([s])[0] for s in alone]
            entry: Dict[str, Any] = {"shape": cpu.config.to_options(), "sentences_batch": len(batch),
                                     "sentences_alone": len(alone), "largest_value": max(float(np.abs(x).max()) for x in reference_batch)}
            for path, optimize in (("default", True), ("plain", False)):
                gpu = on_device(cpu, device, optimize=optimize)
                got_batch = gpu.embed(batch, batch_size=64)
                got_alone = [gpu.embed([s])[0] for s in alone]
                entry[path] = {"batch": largest_difference(reference_batch, got_batch),
                               "one_sentence": largest_difference(reference_alone, got_alone)}
                del gpu
            if name == "tiny_allennlp":
                entry["against_allennlp"] = tiny_against_allennlp(device)
            entry["within_tolerance"] = all(
                v <= PARITY_TOLERANCE for path in ("default", "plain") for v in entry[path].values()
            ) and all(v <= PARITY_TOLERANCE for v in entry.get("against_allennlp", {}).values())
            results[name] = entry
            log(f"parity {name}: {json.dumps({k: entry[k] for k in ('default', 'plain')})}")
    return {"models": results, "within_tolerance": all(e["within_tolerance"] for e in results.values())}


def tiny_against_allennlp(device: torch.device) -> Dict[str, float]:
    """The tiny fixture on the GPU against AllenNLP 2.10.1's own outputs (tests/data/allennlp/tiny)."""
    sentences = json.loads((TINY / "sentences.json").read_text(encoding="utf-8"))["tokens"]
    with np.load(TINY / "expected.npz", allow_pickle=False) as data:
        expected = [data[f"layers_{i}"] for i in range(len(sentences))]
    out = {}
    for path, optimize in (("default", True), ("plain", False)):
        gpu = on_device(load_allennlp(TINY / "options.json", TINY / "weights.hdf5"), device, optimize=optimize)
        out[path] = largest_difference(expected, gpu.embed(sentences, batch_size=64))
    return out


# ---- inference speed


def inference(device: torch.device, train: List[List[str]], *, rounds: int, quick: bool) -> Dict:
    config = SHAPES["tiny" if quick else "full"]
    pool = [s for s in train if 10 <= len(s) <= 40]
    batches = [pool[64 * r : 64 * (r + 1)] for r in range(rounds + 1)]
    singles = [pool[64 * (rounds + 1) + 16 * r : 64 * (rounds + 1) + 16 * (r + 1)] for r in range(rounds + 1)]
    cpu = random_bilm(config)
    with tf32(False):
        reference = on_device(cpu, device, optimize=True).embed(batches[0], batch_size=64)
    modes: Dict[str, Dict[str, Any]] = {
        "fp32": {"tf32": False, "precision": "fp32", "autocast": None},
        "tf32": {"tf32": True, "precision": "fp32", "autocast": None},
        "bf16": {"tf32": False, "precision": "bf16", "autocast": None},
        "fp16": {"tf32": False, "precision": "fp32", "autocast": torch.float16},
    }
    results: Dict[str, Any] = {"shape": config.to_options(), "batch_sentences": 64, "one_sentence_count": 16}
    for mode, setting in modes.items():
        try:
            results[mode] = time_mode(cpu, device, setting, batches, singles, reference)
        except Exception as error:
            results[mode] = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
        log(f"inference {mode}: {json.dumps(results[mode])}")
    cpu_model = on_device(cpu, torch.device("cpu"), optimize=True)
    results["cpu_fp32"] = time_mode(cpu_model, torch.device("cpu"), modes["fp32"], batches[:3], singles[:3], reference,
                                    moved=True)
    log(f"inference cpu_fp32: {json.dumps(results['cpu_fp32'])}")
    if "tokens_per_s_median" in results["fp32"].get("batch", {}):
        results["gpu_over_cpu_batch"] = results["fp32"]["batch"]["tokens_per_s_median"] / results["cpu_fp32"]["batch"]["tokens_per_s_median"]
    return results


def time_mode(cpu: BiLM, device: torch.device, setting: Dict, batches: List, singles: List, reference: List,
              *, moved: bool = False) -> Dict:
    reset_peak(device)
    model = cpu if moved else on_device(cpu, device, optimize=True, precision=setting["precision"])
    autocast = (torch.autocast(device.type, dtype=setting["autocast"]) if setting["autocast"] is not None
                else nullcontext())
    out: Dict[str, Any] = {"status": "finished"}
    with tf32(setting["tf32"]), autocast:
        first = model.embed(batches[0], batch_size=64)
        out["largest_difference_from_fp32"] = largest_difference(reference, first)
        for regime, workload in (("batch", batches), ("one_sentence", singles)):
            rates = []
            for r, sentences in enumerate(workload):
                synchronize(device)
                start = time.perf_counter()
                if regime == "batch":
                    model.embed(sentences, batch_size=64)
                else:
                    for sentence in sentences:
                        model.embed([sentence])
                synchronize(device)
                if r:  # the first round warms up
                    rates.append(sum(map(len, sentences)) / (time.perf_counter() - start))
            out[regime] = {"tokens_per_s_median": statistics.median(rates), "tokens_per_s_min": min(rates),
                           "tokens_per_s_max": max(rates), "rounds": len(rates)}
    out["peak_mib"] = peak_mib(device)
    return out


# ---- pretraining


def pretraining(device: torch.device, train: List[List[str]], *, quick: bool) -> Dict:
    from spacy_elmo.bilm.softmax import WordSoftmax
    from spacy_elmo.training.batches import sentence_batches
    from spacy_elmo.training.config import TrainingSettings
    from spacy_elmo.training.lm import LanguageModel, init_for_training
    from spacy_elmo.training.loop import gradient_scaler, train_step
    from spacy_elmo.training.schedule import make_optimizer
    from spacy_elmo.training.vocab import Vocab

    en_small = resolve_bilm().config
    shapes = {"tiny": (SHAPES["tiny"], 64, (16, 400))} if quick else {
        "en_small": (en_small, 1024, (256, 6144)),  # configs/bilm-small.cfg's samples; the campaign's batches
        "full": (SHAPES["full"], 8192, (128, 2560)),  # bilm-tf's samples; 128 sentences as its batches of 128 rows
    }
    vocab = Vocab.from_counts(Counter(t for s in train for t in s), size=50000, min_count=1)
    results: Dict[str, Any] = {"vocab": len(vocab), "optimizer": "adam", "timed_steps": 8, "warm_up_steps": 2}
    settings_by_mode = {"fp32": ("off", False), "tf32": ("off", True), "bf16": ("bf16", False), "fp16": ("fp16", False)}
    for shape, (config, n_samples, (rows, tokens)) in shapes.items():
        batches = list(sentence_batches(iter(train * 4), vocab, seed=0, epoch=0, batch_size=rows, max_batch_tokens=tokens,
                                        buffer_size=20000, max_chars=config.max_characters_per_token))[:10]
        entry: Dict[str, Any] = {"shape": config.to_options(), "softmax_samples": n_samples, "batch_cap": [rows, tokens]}
        for mode, (autocast, use_tf32) in settings_by_mode.items():
            if autocast == "fp16" and device.type != "cuda":
                continue
            try:
                torch.manual_seed(0)
                reset_peak(device)
                lm = LanguageModel(init_for_training(BiLM(config)), WordSoftmax(len(vocab), config.projection_dim,
                                   n_samples=min(n_samples, len(vocab))), dropout=0.1).to(device)
                lm.train()
                settings = TrainingSettings(optimizer="adam", learning_rate=1e-4, autocast=autocast, tf32=use_tf32)
                optimizer = make_optimizer(lm.parameters(), settings)
                for group in optimizer.param_groups:
                    group.setdefault("initial_lr", group["lr"])
                scaler = gradient_scaler(settings, device)
                losses, seconds, targets = [], 0.0, 0
                with tf32(use_tf32):
                    for k, batch in enumerate(batches):
                        synchronize(device)
                        start = time.perf_counter()
                        _, loss = train_step(lm, batch, optimizer=optimizer, settings=settings, step=k, scaler=scaler)
                        losses.append(float(loss.detach()))
                        if k >= 2:
                            seconds += time.perf_counter() - start
                            targets += batch.n_targets
                entry[mode] = {"tokens_per_s": targets / seconds, "peak_mib": peak_mib(device), "first_loss": losses[0],
                               "last_loss": losses[-1], "finite": all(np.isfinite(losses))}
                del lm, optimizer
            except Exception as error:
                entry[mode] = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
            log(f"pretraining {shape} {mode}: {json.dumps(entry[mode])}")
        results[shape] = entry
    return results


# ---- the language model


def language_model(device: torch.device, test: List[List[str]]) -> Dict:
    """``load_lm(device=)`` of the shipped model: perplexity, log-probabilities and substitutes on
    the device against the CPU's (TF32 off)."""
    from spacy_elmo.training.scoring import load_lm

    sentences = [s for s in test if 5 <= len(s) <= 30][:32]
    results: Dict[str, Any] = {"sentences": len(sentences)}
    with tf32(False):
        cpu, gpu = load_lm(), load_lm(device=device)
        results["device"] = str(gpu.bilm.device)
        ppl = [lm.perplexity(sentences).mean for lm in (cpu, gpu)]
        results["perplexity_cpu"], results["perplexity_device"] = ppl
        results["perplexity_relative_difference"] = abs(ppl[0] - ppl[1]) / ppl[0]
        logprobs = [lm.logprobs(sentences[:8]) for lm in (cpu, gpu)]
        results["logprob_largest_difference"] = max(
            float(np.abs(np.asarray(a.forward) - np.asarray(b.forward)).max()) for a, b in zip(*logprobs))
        found = [lm.substitutes([["We", "sat", "on", "the", "river", "bank", "."]], top=5) for lm in (cpu, gpu)]
        words = [[s.word for s in f[0][5].combined] for f in found]
        results["bank_substitutes_cpu"], results["bank_substitutes_device"] = words
    results["within_tolerance"] = results["logprob_largest_difference"] <= PARITY_TOLERANCE * 10
    return results


# ---- spaCy


def spacy_run(device: torch.device, *, steps: int) -> Dict:
    """``spacy train`` of configs/tagger-elmo.cfg with ``--gpu-id 0`` (the shipped biLM, frozen), then
    ``spacy.load`` and a prediction on the GPU, each in its own interpreter as a user runs them."""
    gpu_id = "0" if device.type == "cuda" else "-1"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = _ewt_corpus(work)
        command = [sys.executable, "-m", "spacy", "train", str(REPO / "configs" / "tagger-elmo.cfg"),
                   "--output", str(work / "out"), "--paths.train", str(corpus["train"]), "--paths.dev", str(corpus["dev"]),
                   "--gpu-id", gpu_id, "--training.max_steps", str(steps), "--training.eval_frequency", str(max(steps // 2, 1)),
                   "--training.patience", "0"]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=420)
        train_s = time.perf_counter() - start
        result: Dict[str, Any] = {"command": " ".join(["python -m spacy train configs/tagger-elmo.cfg", "--gpu-id", gpu_id,
                                                        "--training.max_steps", str(steps)]),
                                  "train_returncode": done.returncode, "train_s": round(train_s, 1),
                                  "train_log_tail": (done.stdout + done.stderr).replace(str(work), "TMP")[-3000:],
                                  "corpus": corpus["counts"]}
        if done.returncode != 0:
            raise RuntimeError(f"spacy train exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
        meta = json.loads((work / "out" / "model-last" / "meta.json").read_text(encoding="utf-8"))
        result["tag_acc_dev"] = meta.get("performance", {}).get("tag_acc")
        predict = subprocess.run([sys.executable, "-c", PREDICT, str(work / "out" / "model-last"), gpu_id],
                                 capture_output=True, text=True, timeout=180)
        if predict.returncode != 0:
            raise RuntimeError(f"prediction exited {predict.returncode}: {(predict.stdout + predict.stderr)[-1500:]}")
        result["prediction"] = json.loads(predict.stdout.strip().splitlines()[-1])
    return result


def _ewt_corpus(work: Path) -> Dict:
    """The bundled EWT sample as .spacy files (spaCy's own CoNLL-U converter)."""
    from spacy.tokens import DocBin
    from spacy.training.converters import conllu_to_docs

    paths, counts = {}, {}
    for split, name in (("train", "train.conllu"), ("dev", "test.conllu")):
        docs = list(conllu_to_docs((EWT / name).read_text(encoding="utf-8"), n_sents=10, no_print=True))
        paths[split] = work / f"{split}.spacy"
        DocBin(docs=docs).to_disk(paths[split])
        counts[split] = {"docs": len(docs), "tokens": sum(len(d) for d in docs)}
    return {**paths, "counts": counts}


PREDICT = r"""
import json, sys
import spacy
gpu = sys.argv[2] != "-1"
if gpu:
    spacy.require_gpu(int(sys.argv[2]))
nlp = spacy.load(sys.argv[1])
doc = nlp("I deposited cash at the bank before we sat on the river bank.")
from spacy_elmo.layers.bilm_model import get_bilm
bilm = get_bilm(nlp.get_pipe("elmo").model)
layers = doc._.elmo.layers
print(json.dumps({
    "tags": [t.tag_ or t.pos_ for t in doc],
    "elmo_layers_type": type(layers).__module__ + "." + type(layers).__name__,
    "elmo_layers_shape": list(layers.shape),
    "token_vector_type": type(doc[5]._.elmo).__module__,
    "ops": type(nlp.get_pipe("tagger").model.ops).__name__,
    "bilm_device": str(bilm.device),
    "bank_cosine": float(__import__("numpy").dot(doc[5]._.elmo, doc[12]._.elmo) / (
        __import__("numpy").linalg.norm(doc[5]._.elmo) * __import__("numpy").linalg.norm(doc[12]._.elmo))),
}))
"""


if __name__ == "__main__":
    main()
