"""The compiled parts of Seam (``seam.source._rowimages``, ``seam.source._rowjson``, ``seam.apply._snapshotrows``, ``seam.wire._frames``);
everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("seam.source._rowimages", ["include/seam/source/_rowimages.c"], optional=True),
        Extension("seam.source._rowjson", ["include/seam/source/_rowjson.c"], optional=True),
        Extension(
            "seam.apply._snapshotrows",
            ["include/seam/apply/_snapshotrows.c"],
            libraries=["z"],
            include_dirs=["include/seam/wire"],
            optional=True,
        ),
        Extension(
            "seam.wire._frames",
            ["include/seam/wire/_frames.c"],
            libraries=["z"],
            include_dirs=["include/seam/wire"],
            optional=True,
        ),
    ]
)
