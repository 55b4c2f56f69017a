"""The `elmo` command group, shared by `python -m spacy_elmo` and `python -m spacy elmo`."""
import typer

app = typer.Typer(
    name="elmo",
    help="ELMo biLMs for spaCy: convert, dump, pretrain, fine-tune, evaluate, probe.",
    no_args_is_help=True,
    add_completion=False,
    # help text as written: rich markup would drop "[spark]" and "[finetune]" as tags
    rich_markup_mode=None,
)


@app.callback()
def _group() -> None:
    """ELMo biLMs for spaCy."""
    from ..records.provenance import mark_start

    mark_start()  # every command's results name the commit it started from
