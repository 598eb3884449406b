"""D.VA's registration with embody (the ``embody.plugins`` entry point ``dva``)."""


def register(api) -> None:
    """Add the ``embody dva`` commands, the cart-pole's rasterizer as a pixel source, and the study."""
    from . import cli

    api.pixel_source("cartpole-raster", "embody.papers.dva.raster:CartPoleRaster")
    api.command("dva", "D.VA: analytic policy gradients with pixels rendered outside the gradient (papers/dva)")
    api.command(
        "dva train",
        "SHAC whose actor reads rendered frames, detached (D.VA); --through: the gradient through a differentiable "
        "pixel source too",
        cli.train_arguments,
        cli.run_train,
    )
    api.command(
        "dva study",
        "D.VA vs SAC/PPO from pixels, DAgger and SHAC from state at equal wall-clock; gradient norms; over seeds",
        cli.study_arguments,
        cli.run_study,
    )
    api.study("dva", "embody.papers.dva.study:StudyConfig", "embody dva study --scale tiny --out DIR")
