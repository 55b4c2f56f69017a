"""What an embed-corpus folder takes on disk, per token, for each choice of layers, dtype and codec.

    python -m bench.bench_embed_sizing --tokens shipped=50000 original=20000 \
        --json results/bench/amd-f25-m17/embed-sizing.json --markdown results/bench/amd-f25-m17/embed-sizing.md

For each model (``shipped``: the package's own biLM; ``original``: random weights of AllenNLP's
published ``original`` shape, torch seed 0, written in the published format and read back), the
start of the real corpus ``bench_embed_defaults`` embeds is run once through the pipeline, in
shards of ``--shard-rows`` lines as ``embed-corpus`` cuts them (``shards.line_docs``); then every
setting builds its tables from those same Docs (``shards.docs_table``) and writes them as the
command does (``shards.parquet_bytes``, each shard's JSON record counted too). Bytes a token is the
folder's bytes over its tokens; "raw" is width x bytes a value for each stored column, so the ratio
says what the rows' other columns and the Parquet file add (or the codec takes off). The seconds to
write each setting's files are kept beside it (the codec's cost next to the embedding's).
"""
import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_elmo.embed.shards import docs_table, line_docs, parquet_bytes, select_columns
from spacy_elmo.io.loading import resolve_bilm, shipped_model_dir
from spacy_elmo.pipeline import create_pipeline
from spacy_elmo.records.provenance import data_record, mark_start, model_record, provenance

from .bench_embed_defaults import SOURCES, add_corpus_options, write_corpus
from .workloads import PUBLISHED_NAMES, bench_command, published_bilm, write_report

LAYERS = ("all", "top", "mix")
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}
# (codec, floats split into byte streams): the command's default first
CODECS = (("zstd", True), ("zstd", False), ("snappy", True), ("snappy", False), ("none", False))
RECORD_BYTES = 250  # a shard's JSON record, about
# AllenNLP's name of the published shape ``workloads`` calls "full"
ORIGINAL = {"original": "full"}


def embedded_shards(bilm: Any, lines: List[str], shard_rows: int, memory: Dict[str, float]) -> List[Any]:
    """The corpus's lines through the pipeline, shard by shard: (docs, split, ids) each. ``memory``
    gets this process's resident MiB after the pipeline is made and after its first shard (an
    actor's work: the model, one shard of ``shard_rows`` lines in batches of 32)."""
    import psutil

    nlp = create_pipeline(bilm)
    elmo = nlp.get_pipe("elmo")
    memory["rss_with_pipeline_mib"] = psutil.Process().memory_info().rss / 2**20
    shards = []
    for first in range(0, len(lines), shard_rows):
        texts = lines[first : first + shard_rows]
        docs, split = line_docs(nlp, elmo, texts, 32)
        shards.append((docs, split, [f"corpus:{first + i + 1}" for i in range(len(texts))]))
        if first == 0:
            memory["rss_after_first_shard_mib"] = psutil.Process().memory_info().rss / 2**20
    return shards


def sizes(shards: List[Any], n_layers: int, tokens: int) -> List[Dict[str, Any]]:
    """Bytes a token, and the seconds to write, of every setting."""
    found = []
    for layers in LAYERS:
        columns = select_columns(layers, n_layers)
        for dtype, value_bytes in DTYPES.items():
            tables = [docs_table(docs, split, ids, columns=columns, dtype=dtype, metadata={"spacy_elmo.layers": layers})[0]
                      for docs, split, ids in shards]
            width = int(tables[0].schema.metadata[b"spacy_elmo.width"])
            for codec, split in CODECS:
                start = time.perf_counter()
                written = sum(len(parquet_bytes(table, codec, split=split)) + RECORD_BYTES for table in tables)
                seconds = time.perf_counter() - start
                raw = width * value_bytes * len(columns)
                found.append({
                    "layers": layers, "dtype": dtype, "compression": codec, "byte_stream_split": split,
                    "bytes": written, "bytes_per_token": written / tokens, "raw_bytes_per_token": raw,
                    "ratio_to_raw": written / tokens / raw, "gb_per_100m_tokens": written / tokens * 1e8 / 1e9,
                    "write_seconds": seconds,
                })
    return found


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", nargs="+", default=["shipped=50000", "original=20000"],
                        help="MODEL=TOKENS: shipped, or a published shape name (random weights)")
    parser.add_argument("--shard-rows", type=int, default=500)
    add_corpus_options(parser)
    args = parser.parse_args(argv)
    mark_start(bench_command("bench.bench_embed_sizing", argv))
    import psutil

    started = time.time()
    report: Dict[str, Any] = {"shard_rows": args.shard_rows, "models": {}, "load_average_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.tokens:
            name, count = spec.split("=")
            corpus = write_corpus(args.data_dir, Path(tmp) / name, int(count))
            lines = [line for path in sorted((Path(tmp) / name).iterdir()) for line in read_text(path).splitlines()]
            shape = ORIGINAL.get(name, name)
            memory = {"rss_before_model_mib": psutil.Process().memory_info().rss / 2**20}
            bilm = resolve_bilm(shipped_model_dir()) if name == "shipped" else published_bilm(shape, Path(tmp))
            memory["weights_mib"] = sum(p.numel() * p.element_size() for p in bilm.parameters()) / 2**20
            start = time.perf_counter()
            shards = embedded_shards(bilm, lines, args.shard_rows, memory)
            embed_seconds = time.perf_counter() - start
            memory["added_by_model_and_first_shard_mib"] = memory["rss_after_first_shard_mib"] - memory["rss_before_model_mib"]
            report["models"][name] = {
                "model": "spacy_elmo/models/en_small (shipped)" if name == "shipped" else
                f"random weights (torch seed 0) of the shape {PUBLISHED_NAMES.get(shape, shape)} ({name})",
                "width": bilm.config.output_dim, "n_layers": bilm.config.n_output_layers, "corpus": corpus,
                "embed_seconds": embed_seconds, "memory": memory, "settings": sizes(shards, bilm.config.n_output_layers, corpus["tokens"]),
            }
            del shards, bilm
    settings = {name: {f"{s['layers']} {s['dtype']} {s['compression']}{'' if s['byte_stream_split'] else ' plain'}": s
                       for s in model["settings"]} for name, model in report["models"].items()}
    report["by_setting"] = settings
    report["load_average_after"] = list(os.getloadavg())
    report["provenance"] = provenance(
        model=model_record(shipped_model_dir()),
        model_note="and random weights (torch seed 0) of each published shape named in --tokens",
        data=data_record([args.data_dir / name for name, _ in SOURCES]))
    report["seconds"] = time.time() - started
    text = markdown(report)
    print(text)
    write_report(report, text, args.json, args.markdown)
    return report


def read_text(path: Path) -> str:
    import gzip

    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def markdown(report: Dict[str, Any]) -> str:
    info = report["provenance"]
    lines = [f"Command: `{info['command']}`", "",
             f"Recorded {info['date']} at commit {info['commit']}{' (dirty)' if info['dirty'] else ''}, on {info['cpu']}.", ""]
    for name, model in report["models"].items():
        memory = model["memory"]
        lines += [f"{model['model']}: width {model['width']}, {model['n_layers']} layers, {model['corpus']['tokens']} tokens; "
                  f"weights {memory['weights_mib']:.0f} MiB, the model and one shard's work add "
                  f"{memory['added_by_model_and_first_shard_mib']:.0f} MiB to the process.", "",
                  "| layers | dtype | codec | bytes a token | x raw | GB per 100M tokens | write s |", "|---|---|---|---:|---:|---:|---:|"]
        for s in model["settings"]:
            codec = s["compression"] + (" (split)" if s["byte_stream_split"] else "")
            lines.append(f"| {s['layers']} | {s['dtype']} | {codec} | {s['bytes_per_token']:.0f} | {s['ratio_to_raw']:.3f} | "
                         f"{s['gb_per_100m_tokens']:.0f} | {s['write_seconds']:.2f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
