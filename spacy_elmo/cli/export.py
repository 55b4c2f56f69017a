"""`export`: a biLM as an ONNX or TorchScript file of the reference computation, with its record beside it;
`serve`: a pipeline's `doc._.elmo` over HTTP."""
import logging
from pathlib import Path
from typing import Optional

import typer

from ..io import ModelFileError
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


@app.command("serve", cls=CommandWithOldSpellings)
def serve_cli(
    pipeline: Optional[Path] = typer.Option(
        None, "--pipeline", help="a spaCy pipeline with an elmo component, instead of a biLM"),
    model: Optional[str] = MODEL,
    options: Optional[Path] = OPTIONS,
    weights: Optional[Path] = WEIGHTS,
    lang: Optional[str] = typer.Option(
        None, "--lang", help="language of the blank pipeline around the biLM (default: the model's where it records "
        "one, English for the shipped biLM)"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    max_chars: Optional[int] = typer.Option(
        None, "--max-chars", min=1, help="longest text accepted (413 beyond); default: what an answer of the mixed "
        "vector holds within --max-response-mb at 4 characters a token, at most 20000 (the start line says which)"),
    max_batch: int = typer.Option(32, "--max-batch", min=1, help="most texts run in one nlp.pipe batch, and in one "
                                  "request"),
    wait_ms: float = typer.Option(5.0, "--wait-ms", min=0.0, help="how long a batch waits for more requests"),
    max_queue: int = typer.Option(256, "--max-queue", min=1, help="most texts waiting; beyond, 503 with Retry-After"),
    max_response_mb: float = typer.Option(8.0, "--max-response-mb", min=0.001, help="largest share of a response "
                                          "body its vectors may take, as encoded (413 beyond); tokens and annotations come on top"),
    frozen_cache_mb: float = typer.Option(0.0, "--frozen-cache-mb", min=0.0, help="megabytes of layers the component "
                                          "keeps per segment (0: none, the server's default)"),
    long_chars: int = typer.Option(1000, "--long-chars", min=0, help="a request whose texts hold more characters "
                                   "together waits in the long lane, beside the short one (0: one lane)"),
    threads: int = typer.Option(1, "--threads", min=0, help="torch threads (0: torch's default; docs/export.md compares 1 "
                                "with the default)"),
) -> None:
    """Serve doc._.elmo over HTTP: POST /embed {"text": ...} or {"texts": [...]}, GET /ready, /metrics
    (docs/export.md)."""
    try:
        import uvicorn

        from ..export.serve import make_app
        from ..export.serve_pipeline import serving_pipeline
    except ImportError as err:
        typer.echo(f"serve: {err.name} is not installed: pip install 'spacy-elmo[serve]'", err=True)
        raise typer.Exit(code=2)
    if pipeline is not None and not pipeline.is_dir():
        typer.echo(f"serve: {pipeline}: pipeline folder not found", err=True)
        raise typer.Exit(code=2)
    import torch

    if threads:
        torch.set_num_threads(threads)
    try:
        nlp = serving_pipeline(pipeline, model=model, options=options, weights=weights, lang=lang,
                               frozen_cache_mb=frozen_cache_mb)
    except (ModelFileError, ValueError, FileNotFoundError) as err:
        typer.echo(f"serve: {err}", err=True)
        raise typer.Exit(code=2)
    lanes = f"short and long (over {long_chars} characters a request)" if long_chars else "one"
    typer.echo(f"serve: {', '.join(nlp.pipe_names)} ({nlp.lang}) on http://{host}:{port}; torch threads: "
               f"{torch.get_num_threads()}{'' if threads else ' (torch default)'}; frozen cache: {frozen_cache_mb} MB; "
               f"queue: {max_queue} texts; lanes: {lanes}", err=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # the app runs its warm-up texts now and logs the limits they give (the tokens an answer holds)
    app = make_app(nlp, max_chars=max_chars, max_batch=max_batch, wait_ms=wait_ms, max_queue=max_queue,
                   max_response_mb=max_response_mb, long_chars=long_chars, torch_threads=torch.get_num_threads())
    uvicorn.run(app, host=host, port=port, access_log=False)  # spacy_elmo.serve logs each request, with more
