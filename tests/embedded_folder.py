"""An embed-corpus output folder made in this process: the per-shard work both engines run
(``ShardEmbedder.embed_item`` over ``shard_blocks``), then the record of a finished run, without
starting Ray or Spark."""
from dataclasses import asdict

from spacy_elmo.embed.corpus import ShardEmbedder, shard_blocks
from spacy_elmo.embed.runs import open_run, write_finished


def embed_here(inputs, output, model, *, layers="all", dtype="float32", shard_rows=4, skip=(), finish=True):
    """Embed ``inputs`` into ``output`` with ``model`` (a pipeline or model directory, or a ModelSource).

    skip (Sequence[int]): input files left out (as a run stopped before them leaves them).
    finish (bool): write the record of a finished run.
    RETURNS (int): the shards written.
    """
    files, output, settings = open_run(inputs, output, model, layers=layers, dtype=dtype, shard_rows=shard_rows)
    embedder = ShardEmbedder(model if not hasattr(model, "is_dir") else str(model), str(output), asdict(settings),
                             batch_size=4, threads=1)
    written, blocks = 0, {}
    for index in range(len(files.paths)):
        if index in skip:
            continue
        for item in shard_blocks(files, index, output, rows=shard_rows, strict=False):
            written += embedder.embed_item(item)["written"]
            blocks[index] = blocks.get(index, 0) + 1
    if finish:
        write_finished(output, settings, files, blocks)
    return written
