"""The tests against the real agent frameworks run only in the frameworks environment.

Google ADK and CrewAI pin versions of the provider SDKs, OpenTelemetry and MCP that
conflict with the ``dev`` set (google-adk 2.x needs ``google-genai<3``, CrewAI
``mcp<2``); LlamaIndex, smolagents, AG2 and AutoGen join them so that ``dev`` stays
small. They live in a second, test-only
virtualenv that ``.ci/run`` builds from ``.ci/frameworks.lock`` and in which it runs
this directory alone, with ``INVOCATION_STORE_FRAMEWORK_TESTS=1`` (tests/README.md).
Elsewhere these modules are not collected: they are not skipped checks, they are
another environment's tests. With the variable set, a framework that fails to import
fails its tests.
"""

from __future__ import annotations

import os

#: Set by .ci/run in the frameworks environment.
ENABLED = os.environ.get("INVOCATION_STORE_FRAMEWORK_TESTS") == "1"

collect_ignore_glob = [] if ENABLED else ["test_*.py"]
