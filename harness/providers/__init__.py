"""Local stand-ins for hosted LLM APIs (Anthropic, OpenAI, Gemini) that follow each provider's
published prompt-cache rules and report its billing usage fields, so a real LiteLLM proxy and real
agent CLIs through it can be measured in money. See server.py (the process), cache.py (the
accounting) and the wire modules."""
