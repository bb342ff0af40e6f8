"""``import invocation_store`` loads nothing heavy; every public name is still where it was (CIS-ECO-4).

The package and :mod:`invocation_store.adapters` resolve their names on first use
(module ``__getattr__``): the in-memory path never imports redis-py, a provider SDK,
a framework or an OpenTelemetry SDK. Import time is measured in
``benchmarks/README.md`` (``python -X importtime``), never asserted here.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import invocation_store
import invocation_store.adapters

HEAVY = (
    "redis",
    "hiredis",
    "opentelemetry",
    "openai",
    "anthropic",
    "google",
    "langchain_core",
    "agents",
    "pydantic_ai",
    "mcp",
    "httpx",
    "httpx2",
)


def _loaded_after(script: str) -> list[str]:
    probe = (
        "import sys\n"
        f"{script}\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return eval(done.stdout.strip())


def test_import_loads_no_redis_sdk_or_framework() -> None:
    """CIS-ECO-4: a bare import loads none of them, nor does the whole in-memory path."""
    assert _loaded_after("import invocation_store") == []
    in_memory = (
        "import invocation_store as cis\n"
        "store = cis.MemoryStore()\n"
        "boundary = cis.ToolBoundary(store, cis.ToolRegistry([]))\n"
        "context = boundary.open_run('r1', deadline_ms=store.now_ms() + 1000, ttl_ms=1000,"
        " tool_call_budget=1, byte_budget=100)\n"
        "envelope = cis.envelopes_from_openai_chat({'role': 'assistant', 'tool_calls': []}, 'r1')\n"
        "import invocation_store.providers, invocation_store.integrations, invocation_store.adapters\n"
        "cis.__version__\n"
    )
    assert _loaded_after(in_memory) == []
    assert "redis" in _loaded_after("import invocation_store as cis; cis.RedisStore")


@pytest.mark.parametrize("name", invocation_store.__all__)
def test_every_public_name_is_importable_as_before(name: str) -> None:
    """CIS-ECO-4: each name of ``__all__`` resolves, is listed by ``dir`` and is its home's object."""
    value = getattr(invocation_store, name)
    assert name in dir(invocation_store)
    home = importlib.import_module(invocation_store._HOMES[name], "invocation_store")
    assert getattr(home, name) is value
    namespace: dict[str, object] = {}
    exec(f"from invocation_store import {name}", namespace)
    assert namespace[name] is value


@pytest.mark.parametrize("name", invocation_store.adapters.__all__)
def test_every_adapter_name_is_importable_as_before(name: str) -> None:
    """CIS-ECO-4: the Redis names of :mod:`invocation_store.adapters` load on first use."""
    value = getattr(invocation_store.adapters, name)
    assert name in dir(invocation_store.adapters)
    home = invocation_store.adapters._LAZY.get(name)
    if home is not None:
        assert getattr(importlib.import_module(home, "invocation_store.adapters"), name) is value


def test_unknown_names_raise_attribute_error_and_version_is_a_string() -> None:
    """CIS-ECO-4: the lazy lookup invents nothing."""
    with pytest.raises(AttributeError, match="no attribute 'RedisStor'"):
        invocation_store.RedisStor  # noqa: B018 - the lookup is the test
    with pytest.raises(AttributeError):
        invocation_store.adapters.MemoryStor  # noqa: B018
    with pytest.raises(ImportError):
        exec("from invocation_store import nothing_here", {})
    assert isinstance(invocation_store.__version__, str)
    assert invocation_store.__version__


@pytest.mark.parametrize(
    ("adapter", "framework", "extra"),
    [
        ("langchain", "langchain_core", "langchain"),
        ("mcp", "mcp", "mcp"),
        ("openai_agents", "agents", "openai-agents"),
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("google_adk", "google.adk", "google-adk"),
        ("autogen", "autogen_core", "autogen"),
        ("ag2", "ag2", "ag2"),
        ("llama_index", "llama_index", "llama-index"),
    ],
)
def test_an_adapter_without_its_extra_names_the_install_command(
    adapter: str, framework: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-ECO-4: the ImportError says ``pip install 'canonical-invocation-store[extra]'``."""
    module = f"invocation_store.integrations.{adapter}"
    monkeypatch.delitem(sys.modules, module, raising=False)
    top = framework.split(".", maxsplit=1)[0]
    for loaded in [m for m in sys.modules if m == top or m.startswith(f"{top}.")]:
        monkeypatch.setitem(sys.modules, loaded, None)  # as if not installed
    monkeypatch.setitem(sys.modules, top, None)
    with pytest.raises(ModuleNotFoundError) as raised:
        importlib.import_module(module)
    assert f"pip install 'canonical-invocation-store[{extra}]'" in str(raised.value)
    assert (raised.value.name or "").split(".")[0] == framework.split(".", maxsplit=1)[0]
