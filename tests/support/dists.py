"""An installed distribution made in a folder: one module and the entry points it declares."""

from __future__ import annotations

from pathlib import Path


def install(root: Path, module: str, source: str, entry_points: str) -> Path:
    """Write `module`.py (`source`) and a `<module>-1.0.dist-info` declaring `entry_points` (its INI text) in `root`.

    With `root` on `sys.path` (or `PYTHONPATH`), `importlib.metadata` finds the distribution and its
    entry points as it finds an installed package's. Returns `root`.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(source, encoding="utf-8")
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return root
