"""Automatic pipeline partitioning (beyond PopTorch): `plan_pipeline` measures a model's
segments on the machine model and chooses the `BeginBlock` boundaries that minimise the
simulated step time within each IPU's memory (`plan`: the steps; `segments`: the
candidate boundaries; `measure`: compiling a placement and reading its figures;
`partition`: the dynamic programme)."""

from poptorch._planner.plan import PipelinePlan, SplitFigures, plan_pipeline

__all__ = ["PipelinePlan", "SplitFigures", "plan_pipeline"]
