"""The fake upstreams run on the real node from a ConfigMap of their source (no image of
their own): the files it carries must be all they import of this repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from humanwork_dev import incluster


def _lay_out(target: Path) -> None:
    """Write the ConfigMap's items where the pod mounts them (`/opt/fakes`)."""
    manifests = incluster.fakes_manifests()
    configmap = next(m for m in manifests if m["kind"] == "ConfigMap")
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    volume = deployment["spec"]["template"]["spec"]["volumes"][0]
    for item in volume["configMap"]["items"]:
        path = target / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(configmap["data"][item["key"]])


def test_the_fakes_import_from_their_configmap_alone(tmp_path: Path) -> None:
    _lay_out(tmp_path)
    # the ConfigMap's tree first on the path, the repository not on it: an import of a
    # module the ConfigMap lacks fails as it does in the pod
    # (and the dev venv's editable install, which would find this repository's modules,
    # taken off the import machinery)
    probe = (
        "import sys; "
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
        "import humanwork_dev, humanwork_dev.fakes.__main__ as m; "
        f"assert humanwork_dev.__file__.startswith({str(tmp_path)!r}), humanwork_dev.__file__; "
        "print(m.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "humanwork_dev.fakes.__main__" in done.stdout
