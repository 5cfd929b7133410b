"""Old home of the frame store (one release): frames are Parquet now.

Frames used to travel as CSV files with a hand-kept list of text and flag
columns; :mod:`deepecg_assets.parquet_frames` stores them as Parquet, whose
types round-trip without such a list. ``markdown_preview`` moved there.
"""

from deepecgkit._compat import moved_names

__moved__ = {"markdown_preview": "deepecg_assets.parquet_frames"}
__getattr__ = moved_names(__name__, __moved__)
