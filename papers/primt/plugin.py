"""PRIMT's registration with embody (the ``embody.plugins`` entry point ``primt``)."""


def register(api) -> None:
    """Add the ``embody primt`` commands."""
    from . import cli

    api.benchmark("primt", "embody.papers.primt.bench")
    api.command("primt", "preference RL from foundation-model judges (papers/primt)")
    api.command(
        "primt train",
        "SAC on a reward learned from a teacher's preferences: scripted, or a text judge (an LLM or the stand-in)",
        cli.train_arguments,
        cli.run_train,
    )
    api.command(
        "primt label",
        "a local web page where a person labels a preference file's pairs (videos side by side, keys, undo)",
        cli.label_arguments,
        cli.run_label,
    )
    api.command(
        "primt study",
        "return and reward quality vs feedback budget: true reward, scripted teacher, text judge; over seeds",
        cli.study_arguments,
        cli.run_study,
    )
