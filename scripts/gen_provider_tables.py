"""Write ``invocation_store/providers/_sdk_tables.py`` from the installed provider SDKs (CIS-ECO-1).

Usage::

    .venv/bin/python scripts/gen_provider_tables.py           # (re)write the module
    .venv/bin/python scripts/gen_provider_tables.py --check   # exit 1 if it differs

The module holds the type tags and field names the ``anthropic``, ``openai`` and
``google-genai`` SDKs declare in their unions (read by
:func:`invocation_store.providers._sdk_types.derive`): never edit it by hand.
``tests/boundary/test_provider_shapes.py`` fails when it is stale.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from invocation_store._generated import generate_main
from invocation_store.providers._sdk_types import derive, render

MODULE = Path(__file__).resolve().parent.parent / "invocation_store" / "providers" / "_sdk_tables.py"
DISTRIBUTIONS = ("anthropic", "openai", "google-genai")


def source() -> str:
    """The module's text, read from the installed SDKs."""
    versions = {name: importlib.metadata.version(name) for name in DISTRIBUTIONS}
    return render(derive(), versions)


def main(argv: list[str] | None = None, path: Path = MODULE) -> int:
    """Write (or with ``--check`` compare) ``path``; returns the exit code (0, or 1 if stale)."""
    return generate_main(
        argv,
        path,
        source,
        description="Generate the provider SDK tables module.",
        script="scripts/gen_provider_tables.py",
    )


if __name__ == "__main__":
    sys.exit(main())
