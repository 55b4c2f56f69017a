"""`dump`: write every biLM layer of every sentence in a file to HDF5, as bilm-tf's dump_bilm_embeddings."""
import json
from pathlib import Path
from typing import List, Optional

import typer

from ..io import load_bilm
from ._app import app


def read_sentences(path: Path) -> List[List[str]]:
    """A `.json` list of token lists, or a `.txt` with one whitespace-tokenized sentence per line."""
    if not path.is_file():
        raise typer.BadParameter(f"{path}: input file not found")
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list) or not all(
            isinstance(s, list) and all(isinstance(t, str) for t in s) for s in data
        ):
            raise typer.BadParameter(f"{path}: a .json input must be a list of lists of token strings")
        return data
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    return [line.split() for line in text.splitlines()]


@app.command("dump")
def dump_cli(
    input: Path = typer.Option(..., "--input", help=".json list of token lists, or .txt one sentence per line"),
    output: Path = typer.Option(..., "--output", help="HDF5 file to write"),
    model: Optional[Path] = typer.Option(None, "--model", help="spacy-elmo model directory"),
    options: Optional[Path] = typer.Option(None, "--options", help="published options.json"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="published HDF5 weights"),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    exact: bool = typer.Option(False, "--exact", help="the plain float32 computation bit for bit (slower)"),
) -> None:
    """Write every biLM layer of every input sentence to HDF5.

    Dataset "i" of OUTPUT holds sentence i's layers, shape (L+1, n_tokens, width), as
    bilm-tf's dump_bilm_embeddings wrote them.
    """
    import h5py

    bilm = load_bilm(model, options=options, weights=weights, optimize=not exact)
    sentences = read_sentences(input)
    vectors = bilm.embed(sentences, batch_size=batch_size)
    output.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(output, "w") as handle:
        for i, layers in enumerate(vectors):
            handle.create_dataset(str(i), data=layers)
    typer.echo(f"Wrote {len(vectors)} sentences to {output}")
