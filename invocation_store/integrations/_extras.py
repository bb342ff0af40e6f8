"""The error an adapter raises when its framework is not installed (CIS-ECO-4)."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(adapter: str, extra: str, error: ImportError) -> ModuleNotFoundError:
    """A ``ModuleNotFoundError`` naming the install command of ``adapter``'s extra.

    ``adapter``: the adapter module (``invocation_store.integrations.langchain``);
    ``extra``: the distribution extra that brings its framework (``langchain``);
    ``error``: the ImportError the framework's import raised (its module name is kept
    as ``name``, so ``except ModuleNotFoundError`` and ``exc.name`` still work).
    """
    missing = error.name.split(".")[0] if error.name else "its framework"
    return ModuleNotFoundError(
        f"{adapter} needs {missing}, which is not installed: "
        f"pip install 'canonical-invocation-store[{extra}]'",
        name=error.name,
    )
