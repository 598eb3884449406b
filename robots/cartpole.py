"""The classic cart-pole: a force on the cart, an encoder on the unactuated pole hinge."""

from embody.assets import asset_path

from .spec import Joint, RobotSpec


def make_spec() -> RobotSpec:
    """The cart-pole's spec: the actuated ``slider`` (force-controlled, no PD gains) and the encoder-only ``hinge``."""
    return RobotSpec(
        name="cartpole",
        joints=(
            Joint("slider", lower=-3.8, upper=3.8, velocity_limit=20.0, torque_limit=10.0, kp=0.0, kd=0.0),
            Joint(
                "hinge", lower=-1e9, upper=1e9, velocity_limit=100.0, torque_limit=0.0, kp=0.0, kd=0.0, actuated=False
            ),
        ),
        mjcf=asset_path("cartpole/cartpole.xml"),
        floating_base=False,
        groups={"cart": (0,)},
        description="cart-pole, DeepMind Control Suite dimensions",
    )
