"""`export`: a biLM as an ONNX or TorchScript file of the reference computation, with its record beside it."""
from pathlib import Path
from typing import Optional

import typer

from ._app import app


@app.command("export")
def export_cli(
    output: Path = typer.Option(..., "--output", help="the file to write (.onnx, .pt); its folder must exist"),
    format: str = typer.Option(..., "--format", help="onnx or torchscript"),
    model: Optional[str] = typer.Option(
        None, "--model", help="what load_bilm reads: our directory, a folder with a published pair, an "
        "ELMoForManyLangs model, a published name; default: the shipped en_small"),
    options: Optional[Path] = typer.Option(None, "--options", help="published options.json (with --weights)"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="published HDF5 weights (with --options)"),
    precision: str = typer.Option("fp32", "--precision", help="fp32; int8 (ONNX, kept if within the cosine bound)"),
    opset: Optional[int] = typer.Option(None, "--opset", help="ONNX opset (default: the pinned one, 17)"),
) -> None:
    """Export a biLM: character ids and lengths in, every layer out, any batch size and length.

    The record OUTPUT.json beside the file names the model, its weights' SHA-256, the char-id
    convention, the opset and the versions (docs/export.md).
    """
    from ..export import OPSET, ExportError, export_model

    try:
        record = export_model(model, output, format, options=options, weights=weights, precision=precision,
                              opset=OPSET if opset is None else opset)
    except (ExportError, ValueError, FileNotFoundError) as err:
        typer.echo(f"export: {err}", err=True)
        raise typer.Exit(code=2)
    typer.echo(f"Wrote {output} ({record['format']}, {record['precision']}, char ids: {record['char_ids']['name']}) "
               f"and its record {output.name}.json")
