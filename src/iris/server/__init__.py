"""What serves HTTP for ``iris serve``: the ASGI app (``asgi``), its worker processes
(``workers``), the h11 connection guard (``connections``), the metrics and status endpoints
(``endpoints``, the page in ``status/``)."""
