"""Regenerate ``docs/asset-graph.png``, the asset graph shown in the README.

Materialises the bundled example corpus into a throw-away Dagster instance,
serves the UI on a free loopback port, and photographs the global asset graph
with Debian's Chromium, exactly as ``tests/deepecg_assets/test_webserver.py``
does. Run it from anywhere::

    .venv/bin/python scripts/screenshot_asset_graph.py [--output PATH]

It needs ``chromium`` (Debian package) and the ``playwright`` Python package
(the ``dev`` extra); it downloads nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from asset_graph_browser import (
    REPO_ROOT,
    WebserverError,
    capture_asset_graph,
    materialize_all,
    platform_environment,
    serve_webserver,
    write_instance_config,
)

from deepecgkit.io import atomic_write_bytes

#: Where the README expects the picture.
DEFAULT_OUTPUT = REPO_ROOT / "docs" / "asset-graph.png"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"PNG file to write (default: {DEFAULT_OUTPUT.relative_to(REPO_ROOT)})",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Write the screenshot; print one line on success or on failure."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="deepecg-screenshot-") as scratch:
        scratch_dir = Path(scratch)
        dagster_home = scratch_dir / "dagster_home"
        write_instance_config(dagster_home)
        environment = platform_environment(dagster_home, scratch_dir / "output")
        try:
            materialize_all(environment)
            with serve_webserver(environment, scratch_dir / "webserver.log") as server:
                capture = capture_asset_graph(server.base_url)
        except WebserverError as exc:
            print(f"screenshot_asset_graph: {exc}", file=sys.stderr)
            return 1
    written = atomic_write_bytes(args.output, capture.png)
    print(f"wrote {written} ({len(capture.png)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
