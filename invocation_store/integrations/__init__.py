"""Framework adapters: one small module per agent framework, each an optional extra (CIS-ECO-4).

- :mod:`invocation_store.integrations.openai_agents`: OpenAI Agents SDK
  (``pip install 'canonical-invocation-store[openai-agents]'``);
- :mod:`invocation_store.integrations.langchain`: LangChain (``[langchain]``);
- :mod:`invocation_store.integrations.pydantic_ai`: pydantic-ai (``[pydantic-ai]``);
- :mod:`invocation_store.integrations.mcp`: MCP Python SDK servers (``[mcp]``);
- :mod:`invocation_store.integrations.google_adk`: Google ADK (``[google-adk]``);
- :mod:`invocation_store.integrations.autogen`: AutoGen agentchat/core (``[autogen]``);
- :mod:`invocation_store.integrations.ag2`: AG2 (``[ag2]``);
- :mod:`invocation_store.integrations.llama_index`: LlamaIndex agent workflows (``[llama-index]``);
- :mod:`invocation_store.integrations.litellm`: LiteLLM responses (no extra: it imports no LiteLLM).

smolagents and CrewAI have no adapter: they hand their tools no call id (docs/integrations.md,
"Invented ids, framework by framework").

Importing this package imports no framework; each module imports its own on import.
Every adapter hands the boundary the framework's own tool_call_id, unchanged (or
no id, for an id the framework made up), and the raw arguments text wherever the
framework keeps it; the model gets back the agent view of the result only
(:func:`invocation_store.providers.agent_text`).
"""
