"""Blindfolded experts' registration with embody (the ``embody.plugins`` entry point ``blindfolded``)."""


def register(api) -> None:
    """Add the ``embody blindfolded`` commands and the study to the CLI."""
    from . import cli

    api.command("blindfolded", "Blindfolded experts: cloning experts denied task information (papers/blindfolded)")
    api.command(
        "blindfolded collect",
        "expert demonstrations of every level on the first m training tasks (or --teleop: a person's, on the arm)",
        cli.collect_arguments,
        cli.run_collect,
    )
    api.command(
        "blindfolded train",
        "a history-conditioned BC policy per level (peg: deployable runs)",
        cli.train_arguments,
        cli.run_train,
    )
    api.command(
        "blindfolded eval",
        "the trained policies on their training and held-out tasks",
        cli.eval_arguments,
        cli.run_eval,
    )
    api.command(
        "blindfolded study",
        "the whole study (levels × m × seeds) with report and plots; resumable",
        cli.study_arguments,
        cli.run_study_command,
    )
    api.command("blindfolded import", "a teleop dataset as peg demonstrations", cli.import_arguments, cli.run_import)
    api.command(
        "blindfolded merge",
        "studies of one configuration on other seeds pooled into one report",
        cli.merge_arguments,
        cli.run_merge,
    )
    api.policy("HistoryPolicy", "embody.papers.blindfolded.history_bc:HistoryPolicy")
    api.study("blindfolded", "embody.papers.blindfolded.config:StudyConfig", "embody blindfolded study --scale tiny")
