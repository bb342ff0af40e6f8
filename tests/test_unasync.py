"""The sync twins are generated from their asyncio sources and are up to date (CIS-STORE-1).

Async code is written once; ``scripts/unasync.py`` derives the sync code. A generated
file edited by hand, or a source changed without regenerating, fails here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from invocation_store.boundary import AsyncToolBoundary, ToolBoundary

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync_script", ROOT / "scripts" / "unasync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("unasync_script", module)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_up_to_date() -> None:
    """CIS-STORE-1: every ``_sync`` file equals what scripts/unasync.py generates from ``_async``."""
    script = _script()
    expected = script.expected_files(ROOT)
    assert expected, "no generated pairs"
    for path, text in expected.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.relative_to(ROOT)} is stale"


def test_generation_turns_async_into_sync() -> None:
    """CIS-STORE-1: the substitutions remove async/await and the Async prefix, and mark the file."""
    script = _script()
    source = (
        "import redis.asyncio as aioredis\n"
        "class AsyncThing:\n"
        "    async def go(self, client: AsyncScript) -> None:\n"
        "        async with self.lock:\n"
        "            await asyncio.sleep(0.1)\n"
        "            await client.aclose_all()\n"
    )
    text = script.generated_text(source, "pkg/_async/thing.py")
    assert text.splitlines() == [
        "# Generated from pkg/_async/thing.py by scripts/unasync.py: do not edit by hand.",
        "import redis as aioredis",
        "class Thing:",
        "    def go(self, client: Script) -> None:",
        "        with self.lock:",
        "            time.sleep(0.1)",
        "            client.aclose_all()",
    ]


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    """CIS-STORE-1: ``--check`` exits 1 and names the stale file; a plain run rewrites it."""
    script = _script()
    for source, target in script.PAIRS:
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / source).write_text((ROOT / source).read_text(encoding="utf-8"), encoding="utf-8")
        (tmp_path / target).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / target).write_text("# edited by hand\n", encoding="utf-8")
    assert script.main(["--check"], root=tmp_path) == 1
    assert script.main([], root=tmp_path) == 0
    assert script.main(["--check"], root=tmp_path) == 0


def test_boundary_helpers_turn_into_their_sync_twins() -> None:
    """CIS-STORE-1: the boundary's per-flavour names map to the sync ones (``async_x`` -> ``x``)."""
    script = _script()
    source = (
        "from .._runner import AsyncStoreMethod, async_check_tool, async_run_tool\n"
        "    @_telemetry.observed_ainvoke\n"
        "    async def invoke(self) -> None:\n"
        "        async_check_tool(tool)\n"
        "        outcome = await async_run_tool(tool.executor, None, args)\n"
        "        await async_pause(seconds)\n"
        "        reader = async_progress_reader(self.store)\n"
    )
    text = script.generated_text(source, "pkg/_async/boundary.py")
    assert text.splitlines()[1:] == [
        "from .._runner import StoreMethod, check_tool, run_tool",
        "    @_telemetry.observed_invoke",
        "    def invoke(self) -> None:",
        "        check_tool(tool)",
        "        outcome = run_tool(tool.executor, None, args)",
        "        pause(seconds)",
        "        reader = progress_reader(self.store)",
    ]


def test_the_generated_boundary_offers_every_method_of_its_source() -> None:
    """CIS-BND-1: ToolBoundary (generated) and AsyncToolBoundary have the same public methods."""

    def public(cls: type) -> set[str]:
        return {name for name in vars(cls) if not name.startswith("__")}

    assert public(ToolBoundary) == public(AsyncToolBoundary)
    assert "invoke" in public(ToolBoundary)
    assert ToolBoundary.__module__ == "invocation_store.boundary._sync.boundary"


def test_the_redis_substitutions_close_and_name_the_blocking_flavour() -> None:
    """CIS-STORE-1: redis-py's ``aclose()`` becomes ``close()`` (``aclose_all`` is left alone), the
    asyncio cluster client becomes the blocking one, and the per-flavour helpers lose their prefix."""
    script = _script()
    source = (
        "import redis.asyncio.cluster\n"
        "    client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster\n"
        "        await AsyncRedisFlavour.sleep(0.1)\n"
        "    async def _io(self, send: AsyncSend[T]) -> T:\n"
        "        await self._client.aclose()\n"
        "        await pool.aclose_all()\n"
    )
    text = script.generated_text(source, "pkg/_async/redis.py")
    assert text.splitlines()[1:] == [
        "import redis.cluster",
        "    client: redis.Redis | redis.cluster.RedisCluster",
        "        RedisFlavour.sleep(0.1)",
        "    def _io(self, send: Send[T]) -> T:",
        "        self._client.close()",
        "        pool.aclose_all()",
    ]
