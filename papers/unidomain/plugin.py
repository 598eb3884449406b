"""UniDomain's registration with embody (the ``embody.plugins`` entry point ``unidomain``)."""


def register(api) -> None:
    """Add ``embody plan eval`` and the study to the CLI."""
    from .cli import eval_arguments, run_eval

    api.command(
        "plan eval",
        "the UniDomain study: learn from demonstrations, plan held-out tasks, report",
        eval_arguments,
        run_eval,
    )
    api.study("unidomain", "embody.papers.unidomain.study:StudyConfig", "embody plan eval --scale tiny")
