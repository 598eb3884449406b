"""The trajectory backdoor's registration with embody (the ``embody.plugins`` entry point ``backdoor``)."""


def register(api) -> None:
    """Add the ``embody backdoor`` commands."""
    from . import cli

    api.command("backdoor", "trajectory backdoors on offline-RL driving agents (papers/backdoor)")
    api.command(
        "backdoor trigger",
        "attacker behaviors refined until a temporal-logic trigger spec holds (exit 3: never); patches beside",
        cli.trigger_arguments,
        cli.run_trigger,
    )
