"""MPA's registration with embody (the ``embody.plugins`` entry point ``mpa``)."""


def register(api) -> None:
    """Add the ``embody mpa`` commands and the study to the CLI."""
    from . import cli

    api.command("mpa", "MPA: model-based policy adaptation for end-to-end driving (papers/mpa)")
    api.command(
        "mpa train",
        "expert data, base BC, counterfactual branches, adapter and Q model into DIR/models",
        cli.common_arguments,
        cli.run_train,
    )
    api.command(
        "mpa eval",
        "the evaluation (trains first unless DIR or --models holds trained models): "
        "results.json, report.md, plots; --seeds N: resumable replicate seeds, pooled",
        cli.eval_arguments,
        cli.run_eval,
    )
    api.command(
        "mpa diagnose",
        "argmax-Q on held-out branch points of the counterfactual data (JSON)",
        cli.diagnose_arguments,
        cli.run_diagnose,
    )
    api.command(
        "mpa merge",
        "`eval --seeds` folders of one configuration pooled into one report",
        cli.merge_arguments,
        cli.run_merge,
    )
    api.study("mpa", "embody.papers.mpa.config:MPAConfig", "embody mpa eval --scale tiny")
