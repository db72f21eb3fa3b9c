"""The pytest plug-in (`tlmscore.pytest_plugin`, installed with the package): in another project it loads
nothing of tlmscore but itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_pytest_plugin_imports_nothing_of_tlmscore_in_other_projects(tmp_path: Path) -> None:
    """Only the package (with the helper that defers its names) and the plugin are loaded, no stage."""
    (tmp_path / "test_other.py").write_text(
        "import sys\n\n\ndef test_nothing_of_tlmscore_is_loaded():\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('tlmscore'))\n"
        "    assert loaded == ['tlmscore', 'tlmscore._lazy', 'tlmscore.pytest_plugin'], loaded\n"
        "    assert 'pydantic' not in sys.modules or 'tlmscore.settings' not in sys.modules\n", encoding="utf-8")
    # The other project's folder has no pytest configuration: the plug-ins of arize-phoenix-client and
    # langsmith, which load their packages (seconds of CPU), are left out as the project's own configuration does.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix",
                           "-p", "no:langsmith_plugin", "test_other.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
