"""The sweep: the search space, the plan and fan-out, the run's settings, and the work of
each pipeline step. Imports the layers below it (up to ``evaluation``)."""
