"""D.VA (arXiv 2505.10646): visual policies learned with SHAC's analytic policy gradients through a differentiable
simulator, the actor reading rendered pixels outside the gradient. The core provides the differentiable MuJoCo step
(``embody.sims.diff``), SHAC with a pixel actor (``embody.policies.shac``) and the batched renderer; this plugin adds
the cart-pole's differentiable rasterizer (the gradient-through-rendering ablation), the study and the
``embody dva`` commands. See README.md."""
