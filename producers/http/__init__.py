"""The HTTP way in: the FastAPI app (``app``), what its routes depend on (``deps``), its error
answers (``problems``), its middleware (``auth``, ``wire``, ``body_policy``, ``slow_clients``,
``connections``, ``bodies``, ``arrival``), ``/healthz``'s probes (``health``, ``health_cache``), the
searches awaited on the event loop (``searches``, ``results``, ``tenant_slots``), ``routes/`` one
module per resource and ``ui/`` the status page. Importing the package makes no app: import
``producers.http.app`` for that.
"""
