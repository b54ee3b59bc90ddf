"""The sdist hook is the repository's ``_sdist_tests.py`` (read it there); the sdist holds a copy."""
import runpy
from pathlib import Path

SdistWithTests = runpy.run_path(str(Path(__file__).resolve().parents[2] / "_sdist_tests.py"))["SdistWithTests"]
