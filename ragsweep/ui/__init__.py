"""``ragsweep ui``: a server-rendered web app over the results database (runs, leaderboards,
drill-downs, comparisons, test sets, local runs). ``create_app`` builds it."""

from ragsweep.ui.app import create_app

__all__ = ["create_app"]
