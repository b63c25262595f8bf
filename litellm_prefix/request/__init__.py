"""The request path: what the hook does to one request.

``core`` is the shell (the journal loaded and saved, the incremental path, the events handed to
the measurement); ``pipeline`` runs the ``rules/`` over a ``view`` of the request that ``wire/``
reads from each API's shape and writes back. Below them the data the rules read: the session's
``journal``, its identity (``session``), the head's ``sections``, what changed (``drift``), the
agents' ``profiles``, the ``target`` deployment, the rule's ``context`` and the ``events`` it
reports, the ``disk`` probes. Nothing here imports ``hook`` or ``offline``."""
