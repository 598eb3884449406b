"""ALMI's registration with embody (the ``embody.plugins`` entry point ``almi``)."""


def register(api) -> None:
    """Add ALMI's tasks and the ``embody almi`` commands."""
    from . import cli

    api.task("almi", "embody.papers.almi.tasks:AlmiWholeBody")
    api.task("almi-lower", "embody.papers.almi.tasks:AlmiLower")
    api.task("almi-upper", "embody.papers.almi.tasks:AlmiUpper")
    api.policy("ReferencePolicy", "embody.papers.almi.policies:ReferencePolicy")
    api.command("almi", "ALMI: adversarial locomotion and motion imitation on the H1-2 (papers/almi)")
    api.command(
        "almi train",
        "the alternation lower-1 → upper-1 → … (resumable), composed into one whole-body run in DIR",
        cli.train_arguments,
        cli.run_train,
    )
    api.command(
        "almi compose",
        "one whole-body run from an almi-lower and an almi-upper run",
        cli.compose_arguments,
        cli.run_compose,
    )
    api.command(
        "almi eval",
        "whole-body runs on held-out motions while walking: a table per method with intervals, survival vs intensity",
        cli.eval_arguments,
        cli.run_eval,
    )
    api.command(
        "almi study",
        "ALMI vs a whole-body policy, no curricula and open-loop clips, same budget, seeds (resumable); evaluated",
        cli.study_arguments,
        cli.run_study,
    )
    api.command(
        "almi export-dataset",
        "an ALMI-X style dataset: the whole-body policy over clips × command templates, a language task each",
        cli.export_arguments,
        cli.run_export,
    )
    api.benchmark("almi-gpu", "embody.papers.almi.bench")  # run by scripts/gpu_check.sh
    api.study("almi", "embody.papers.almi.train:AlmiTrainConfig", "embody almi study --scale tiny")
