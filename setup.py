"""The compiled parts of Seam (``seam.source._rowimages``, ``seam.source._rowjson``, ``seam.apply._snapshotrows``, ``seam.wire._frames``);
everything else is in pyproject.toml."""

from setuptools import Extension, setup

# the CRC-32 of the rows they sum (seam/wire/fast_crc32.h), zlib's where the CPU has no carry-less multiply
WITH_CRC = {"libraries": ["z"], "include_dirs": ["include/seam/wire"], "optional": True}

setup(
    ext_modules=[
        Extension("seam.source._rowimages", ["include/seam/source/_rowimages.c"], optional=True),
        Extension("seam.source._rowjson", ["include/seam/source/_rowjson.c"], optional=True),
        Extension("seam.apply._snapshotrows", ["include/seam/apply/_snapshotrows.c"], **WITH_CRC),
        Extension("seam.wire._frames", ["include/seam/wire/_frames.c"], **WITH_CRC),
    ]
)
