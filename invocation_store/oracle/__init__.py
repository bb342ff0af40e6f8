"""The reference oracle: trace format, checker, recorder and conformance vectors.

Other implementations of the store (the original is Java) record what they did as a
trace (JSON Lines, see ``spec/trace.md``); :func:`check_lines` (the
``invocation-store check-trace`` command) replays it through the kernel and reports
the first divergence with the requirement it violates (CIS-ORC-1, CIS-ORC-2).
:class:`RecordingBoundary` records such traces from this project's own boundary and
stores; :func:`generate_vectors` builds the conformance vectors of ``spec/vectors/``
from the kernel (CIS-SPEC-3).
"""

from ._checker import CheckReport, Divergence, MalformedTraceError, Oracle, check_lines, decode_line
from ._model import LINE_TYPES, TRACE_FORMAT, TRACE_VERSION
from ._recorder import RecordingBoundary
from ._synthetic import write_synthetic_trace
from ._validate import ShapeError, line_checker, strict_converter, structure_line, trace_schema
from ._vectors import VECTOR_FORMAT, VECTOR_VERSION, generate_vectors, run_vector

__all__ = [
    "LINE_TYPES",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "VECTOR_FORMAT",
    "VECTOR_VERSION",
    "CheckReport",
    "Divergence",
    "MalformedTraceError",
    "Oracle",
    "RecordingBoundary",
    "ShapeError",
    "check_lines",
    "decode_line",
    "generate_vectors",
    "line_checker",
    "run_vector",
    "strict_converter",
    "structure_line",
    "trace_schema",
    "write_synthetic_trace",
]
