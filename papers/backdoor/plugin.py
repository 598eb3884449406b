"""The trajectory backdoor's registration with embody (the ``embody.plugins`` entry point ``backdoor``)."""


def register(api) -> None:
    """Add the ``embody backdoor`` commands and ``embody bench backdoor``."""
    from . import cli

    api.benchmark("backdoor", "embody.papers.backdoor.bench")
    api.command("backdoor", "trajectory backdoors on offline-RL driving agents (papers/backdoor)")
    api.command(
        "backdoor trigger",
        "attacker behaviors refined until a temporal-logic trigger spec holds (exit 3: never); patches beside",
        cli.trigger_arguments,
        cli.run_trigger,
    )
    api.command(
        "backdoor dataset",
        "a poisoned offline driving dataset (LeRobot layout) from a trigger library",
        cli.dataset_arguments,
        cli.run_dataset,
    )
    api.command(
        "backdoor train",
        "one of the five offline agents (bc, td3bc, iql, cql, dt) on a driving dataset",
        cli.train_arguments,
        cli.run_train,
    )
    api.command(
        "backdoor study",
        "trigger/target combinations x five offline agents x {clean, poisoned, negative training}",
        cli.study_arguments,
        cli.run_study,
    )
    api.command(
        "backdoor demo",
        "one seed played with and without a trigger: side-by-side video and robustness plot",
        cli.demo_arguments,
        cli.run_demo,
    )
