"""Kubeflow components, one per pipeline step: read artifacts, call ragsweep, write artifacts.

Every component runs on the project image (``RAGSWEEP_IMAGE`` at compile time) with ragsweep
and kfp already installed, and imports ragsweep inside its body.
"""

import os

BASE_IMAGE = os.environ.get("RAGSWEEP_IMAGE", "localhost/ragsweep:latest")
