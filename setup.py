"""The compiled part of Seam (``seam.source._rowimages``); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("seam.source._rowimages", ["include/seam/source/_rowimages.c"], optional=True)])
