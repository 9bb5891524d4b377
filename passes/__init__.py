"""MLIR passes on the ipu dialect (installed as `poptorch.passes`).

Importing this package registers every pass; `all_passes()` lists them and
`parse_pipeline` / `build_pass_manager` turn pipeline text into an MLIR PassManager.
"""

from . import (
    assign_stages,
    check_torch_ops,
    convert_poptorch_ops,
    convert_torch_to_ipu,
    import_annotations,
    insert_copies,
    mark_overlapped_io,
    narrow_f64,
    outline_stages,
    precision,
    recompute,
    schedule,
    schedule_phases,
    simplify,
    verify_placement,
)
from .pipeline import PipelineError, build_pass_manager, parse_pipeline
from .registry import (
    DiagnosticWarning,
    Option,
    Pass,
    PassError,
    PassOptionError,
    all_passes,
    get_pass,
    register,
)

__all__ = [
    "assign_stages",
    "DiagnosticWarning",
    "Option",
    "Pass",
    "PassError",
    "PassOptionError",
    "PipelineError",
    "all_passes",
    "build_pass_manager",
    "get_pass",
    "check_torch_ops",
    "convert_poptorch_ops",
    "convert_torch_to_ipu",
    "import_annotations",
    "insert_copies",
    "mark_overlapped_io",
    "narrow_f64",
    "precision",
    "outline_stages",
    "recompute",
    "schedule",
    "schedule_phases",
    "parse_pipeline",
    "register",
    "simplify",
    "verify_placement",
]
