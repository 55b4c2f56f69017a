"""`export`: a biLM as an ONNX or TorchScript file of the reference computation, with its record beside it;
`serve`: a pipeline's `doc._.elmo` over HTTP."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app
from ._vocabulary import MODEL, OPTIONS, WEIGHTS, CommandWithOldSpellings, output_file


@app.command("export", cls=CommandWithOldSpellings)
def export_cli(
    output: Path = typer.Option(..., "--output", help="the file to write (.onnx, .pt); its folder must exist",
                                callback=output_file),
    to: str = typer.Option(..., "--to", help="the file format: onnx or torchscript"),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    precision: str = typer.Option("fp32", "--precision", help="the inference precision word: fp32; int8 (ONNX, kept if "
                                  "within the cosine bound)"),
    opset: Optional[int] = typer.Option(None, "--opset", help="ONNX opset (default: the pinned one, 17)"),
) -> None:
    """Export a biLM: character ids and lengths in, every layer out, any batch size and length.

    The record OUTPUT.json beside the file names the model, its weights' SHA-256, the char-id
    convention, the opset and the versions (docs/export.md).
    """
    from ..export import OPSET, ExportError, export_model

    try:
        record = export_model(model, output, to, options=options, weights=weights, precision=precision,
                              opset=OPSET if opset is None else opset)
    except (ExportError, ValueError, FileNotFoundError) as err:
        typer.echo(f"export: {err}", err=True)
        raise typer.Exit(code=2)
    typer.echo(f"Wrote {output} ({record['format']}, {record['precision']}, char ids: {record['char_ids']['name']}) "
               f"and its record {output.name}.json")


@app.command("serve")
def serve_cli(
    pipeline: Optional[Path] = typer.Option(
        None, "--pipeline", help="a spaCy pipeline with an elmo component; default: blank English + the shipped biLM"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    max_chars: int = typer.Option(20_000, "--max-chars", min=1, help="longest text accepted (413 beyond)"),
    max_batch: int = typer.Option(32, "--max-batch", min=1, help="most texts run in one nlp.pipe batch"),
    wait_ms: float = typer.Option(5.0, "--wait-ms", min=0.0, help="how long a batch waits for more requests"),
    threads: int = typer.Option(0, "--threads", min=0, help="torch threads (0: torch's default)"),
) -> None:
    """Serve doc._.elmo (its layers and mixed vector) over HTTP: POST /embed {"text": ...} (docs/export.md)."""
    import spacy

    try:
        import uvicorn

        from ..export.serve import make_app
    except ImportError as err:
        typer.echo(f"serve: {err.name} is not installed: pip install 'spacy-elmo[serve]'", err=True)
        raise typer.Exit(code=2)
    if pipeline is not None and not pipeline.is_dir():
        typer.echo(f"serve: {pipeline}: pipeline folder not found", err=True)
        raise typer.Exit(code=2)
    if threads:
        import torch

        torch.set_num_threads(threads)
    if pipeline is None:
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo")
        nlp.initialize()
    else:
        nlp = spacy.load(pipeline)
    uvicorn.run(make_app(nlp, max_chars=max_chars, max_batch=max_batch, wait_ms=wait_ms), host=host, port=port)
