"""Offline tools: session files and cache models (``replay``), the log's summaries
(``report``) and the ``litellm-prefix`` command (``cli``). Nothing on a request's path
imports from here."""
