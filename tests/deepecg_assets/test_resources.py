"""The output folder may be a path or a ``file://`` URL of shared storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepecg_assets.resources import OutputFolderResource, local_folder


@pytest.mark.parametrize(
    ("text", "folder"),
    [
        ("deepecg_output", Path("deepecg_output")),
        ("/shared/out", Path("/shared/out")),
        ("runs:v2", Path("runs:v2")),  # a colon alone does not make a URL
        ("file:///shared/deepecg_output", Path("/shared/deepecg_output")),
        ("file://localhost/shared/out", Path("/shared/out")),
        ("file:///shared/my%20lab/out", Path("/shared/my lab/out")),
    ],
)
def test_paths_and_file_urls_name_the_same_folder(text: str, folder: Path) -> None:
    assert local_folder(text) == folder


def test_file_url_round_trips_through_as_uri(tmp_path: Path) -> None:
    folder = tmp_path / "with space" / "out"
    assert local_folder(folder.as_uri()) == folder
    assert OutputFolderResource(path=folder.as_uri()).frames_dir() == folder / "frames"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("s3://bucket/out", "s3:// is not supported"),
        ("file://nas/shared/out", "names host 'nas'"),
    ],
)
def test_other_schemes_and_remote_hosts_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        local_folder(text)
